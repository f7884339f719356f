package dev.sandbox4j.remote;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The whole workspace contract through {@link RemoteSandbox} against a real server on loopback. */
class RemoteSandboxConformanceTest extends WorkspaceConformanceSuite {

  private static LoopbackServer server;

  @BeforeAll
  static void startServer() {
    server = new LoopbackServer();
  }

  @AfterAll
  static void stopServer() {
    if (server != null) {
      server.close();
    }
  }

  @Override
  protected WorkspaceProvider provider() {
    return server.client().build();
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return server.client().beforeCreate(() -> SlowCreation.sleep(delay)).build().newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return server.client().env(env).build().newBackend();
  }
}
