package dev.sandbox4j.remote;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The machine capabilities' contract through {@link RemoteSandbox} against a real server on
 * loopback.
 */
class RemoteSandboxMachineConformanceTest extends MachineConformanceSuite {

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
  protected WorkspaceBackend newBackendFromSnapshot(String name) {
    return server.client().snapshot(name).build().newBackend();
  }
}
