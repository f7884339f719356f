package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import dev.sandbox4j.workspace.machine.SupportsHibernate;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;

/**
 * The machine capabilities' contract against real local sandboxes under gVisor. Hibernate does not
 * apply: it needs checkpoint/restore, which gVisor sandboxes lack (GvisorSandboxTest checks that it
 * fails saying so).
 */
class GvisorSandboxMachineConformanceTest extends MachineConformanceSuite {

  private static final LocalSandbox SANDBOXES =
      LocalSandbox.builder().isolation(Isolation.GVISOR).build();

  @BeforeAll
  static void requireGvisor() {
    Prerequisites.requireGvisor();
  }

  @Override
  protected WorkspaceProvider provider() {
    return SANDBOXES;
  }

  @Override
  protected Set<Class<?>> notApplicableHere() {
    return Set.of(SupportsHibernate.class);
  }

  @Override
  protected WorkspaceBackend newBackendFromSnapshot(String name) {
    return LocalSandbox.builder().isolation(Isolation.GVISOR).snapshot(name).build().newBackend();
  }
}
