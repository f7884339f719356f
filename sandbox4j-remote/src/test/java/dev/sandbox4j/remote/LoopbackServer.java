package dev.sandbox4j.remote;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerKeys;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;

/**
 * A real sandbox4j server on 127.0.0.1 (any free port) over the local engine of {@code
 * $SANDBOX4J_HOME} and a fresh data directory, with a key for one organization.
 */
final class LoopbackServer implements AutoCloseable {

  final LocalSandbox engine;
  final Path data;
  final String key;
  final List<String> log = new CopyOnWriteArrayList<>();
  private final UnaryOperator<SandboxServer.Builder> options;
  SandboxServer server;

  LoopbackServer() {
    this(b -> b);
  }

  /** A server with {@code options} applied over the defaults below. */
  LoopbackServer(UnaryOperator<SandboxServer.Builder> options) {
    this.options = options;
    requireLocalEngine();
    try {
      data = Files.createTempDirectory("sandbox4j-remote-test-");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    engine = LocalSandbox.builder().build();
    key = key("org-a");
    start();
  }

  /** Root on Linux with crun, as the local engine needs; skips without, except under CI=true. */
  static void requireLocalEngine() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun"))
            || Files.isExecutable(Path.of("/usr/bin/crun")),
        "crun (sandbox4j setup)");
  }

  /** A new key of {@code organization}. */
  String key(String organization) {
    try (ServerKeys keys = ServerKeys.open(data)) {
      return keys.create(organization).key();
    }
  }

  void start() {
    server =
        options
            .apply(
                SandboxServer.builder()
                    .engine(engine)
                    .dataDirectory(data)
                    .bind("127.0.0.1", 0)
                    .requestLog(log::add)
                    // tests create sandboxes faster than the default create rate allows
                    .maxSandboxesPerOrganization(1000)
                    .createRateLimit(1000, java.time.Duration.ofMillis(1)))
            .build()
            .start();
  }

  /** How many request log lines have {@code method} and {@code route}. */
  long logged(String method, String route) {
    return log.stream()
        .map(
            line -> {
              try {
                return ServerClient.JSON.readTree(line);
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
            })
        .filter(l -> l.path("method").asText().equals(method))
        .filter(l -> l.path("route").asText().equals(route))
        .count();
  }

  /**
   * {@link #logged}, once it reached {@code n}: the server logs a command after its last event went
   * out, so the client can see the command end before its line is written.
   */
  long loggedAtLeast(String method, String route, long n) {
    long deadline = System.nanoTime() + java.time.Duration.ofSeconds(30).toNanos();
    long count;
    while ((count = logged(method, route)) < n && System.nanoTime() < deadline) {
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return count;
  }

  /** Stops the server (open exec streams are cut) and starts it again on a new port. */
  void restart() {
    server.close();
    start();
  }

  String url() {
    return server.uri().toString();
  }

  /** The provider for this server and key, with {@code options} for new sandboxes. */
  RemoteSandbox.Builder client() {
    return RemoteSandbox.builder().url(url()).apiKey(key);
  }

  @Override
  public void close() {
    server.close();
    try (Stream<Path> files = Files.walk(data)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // a temp directory left behind is harmless
    }
  }
}
