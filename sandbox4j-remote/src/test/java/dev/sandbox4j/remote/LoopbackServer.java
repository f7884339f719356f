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
import java.util.stream.Stream;

/**
 * A real sandbox4j server on 127.0.0.1 (any free port) over the local engine of {@code
 * $SANDBOX4J_HOME} and a fresh data directory, with a key for one organization.
 */
final class LoopbackServer implements AutoCloseable {

  final LocalSandbox engine;
  final Path data;
  final String key;
  SandboxServer server;

  LoopbackServer() {
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
        SandboxServer.builder()
            .engine(engine)
            .dataDirectory(data)
            .bind("127.0.0.1", 0)
            .requestLog(line -> {})
            // tests create sandboxes faster than the default create rate allows
            .maxSandboxesPerOrganization(1000)
            .createRateLimit(1000, java.time.Duration.ofMillis(1))
            .build()
            .start();
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
