package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import org.junit.jupiter.api.BeforeAll;

/** The machine capabilities' contract against real local sandboxes. */
class LocalSandboxMachineConformanceTest extends MachineConformanceSuite {

  private static final LocalSandbox SANDBOXES = new LocalSandbox();

  @BeforeAll
  static void requireEngine() {
    Prerequisites.requireLocalEngine();
  }

  @Override
  protected WorkspaceProvider provider() {
    return SANDBOXES;
  }

  @Override
  protected WorkspaceBackend newBackendFromSnapshot(String name) {
    return LocalSandbox.builder().snapshot(name).build().newBackend();
  }
}
