package dev.sandbox4j.bench;

import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerKeys;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The {@code remote} provider against a sandbox4j server this run starts on 127.0.0.1 (any free
 * port), over the same local engine {@code local} measures ({@code $SANDBOX4J_HOME}, crun, the
 * default image) and a fresh data directory under the scratch directory. Comparing its figures with
 * {@code local}'s gives what the server and the HTTP/WebSocket round trip add. Every sandbox
 * carries the run label, as {@link LocalTarget}'s do; {@link #close()} destroys what is left
 * through the engine, then stops the server.
 */
final class RemoteTarget implements Target {

  private static final Command NODE_VERSION = Command.argv("node", "-v");

  private final String runId = ProcessHandle.current().pid() + "@" + Instant.now();
  private final LocalSandbox engine;
  private final SandboxServer server;
  private final RemoteSandbox provider;

  private RemoteTarget(Path scratch) {
    engine = LocalSandbox.builder().build();
    Path data = scratch.resolve("server");
    String key;
    try {
      Files.createDirectories(data);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    try (ServerKeys keys = ServerKeys.open(data)) {
      key = keys.create("bench").key();
    }
    server =
        SandboxServer.builder()
            .engine(engine)
            .dataDirectory(data)
            .bind("127.0.0.1", 0)
            .requestLog(line -> {})
            // the bench creates hundreds of sandboxes in bursts of 20: no quota or rate limit
            .maxSandboxesPerOrganization(10_000)
            .createRateLimit(10_000, java.time.Duration.ofMillis(1))
            .build()
            .start();
    provider =
        RemoteSandbox.builder()
            .url(server.uri())
            .apiKey(key)
            .label(LocalTarget.RUN_LABEL, runId)
            .build();
  }

  static RemoteTarget create(Path scratch) {
    return new RemoteTarget(scratch);
  }

  @Override
  public WorkspaceProvider provider() {
    return provider;
  }

  @Override
  public Command firstCommand() {
    return NODE_VERSION;
  }

  @Override
  public boolean sandboxed() {
    return false; // idle memory is the engine's figure: measure it with --provider local
  }

  @Override
  public java.util.Optional<Target.ExtraScenarios> extraScenarios() {
    return java.util.Optional.of(new ServerOverhead(provider, engine));
  }

  @Override
  public Map<String, Object> details() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("server", server.uri().toString());
    m.put("transport", "HTTP/1.1 + WebSocket on loopback (java.net.http)");
    m.put("engine_home", engine.home().toString());
    m.put("image", "default");
    m.put("run_label", LocalTarget.RUN_LABEL + "=" + runId);
    return m;
  }

  @Override
  public synchronized void close() {
    try {
      List<WorkspaceRef> left =
          provider.list(Map.of(LocalTarget.RUN_LABEL, runId), null).stream()
              .map(SandboxInfo::ref)
              .toList();
      left.forEach(provider::destroy);
      if (!left.isEmpty()) {
        System.err.printf("bench: destroyed %d sandbox(es) this run left%n", left.size());
      }
    } catch (RuntimeException e) {
      System.err.println("bench: cannot clean up the server's sandboxes: " + e);
    } finally {
      server.close();
    }
  }
}
