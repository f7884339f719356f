package dev.sandbox4j.boxd;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The machine capabilities' contract through {@link BoxdSandbox} against the fake boxd: listing,
 * suspend and stop. The snapshot section is not applicable: it lists snapshots, for which boxd's
 * public material names no RPC; {@link BoxdSandboxTest} covers saving, polling, starting from and
 * removing snapshots instead.
 */
class BoxdSandboxMachineConformanceTest extends MachineConformanceSuite {

  private static FakeBoxd boxd;

  @BeforeAll
  static void startFake() throws Exception {
    boxd = new FakeBoxd();
  }

  @AfterAll
  static void stopFake() {
    if (boxd != null) {
      boxd.close();
    }
  }

  @Override
  protected WorkspaceProvider provider() {
    return boxd.client().build();
  }

  @Override
  protected WorkspaceBackend newBackendFromSnapshot(String name) {
    return boxd.client().snapshot(name).build().newBackend();
  }

  @Override
  protected Set<Class<?>> notApplicableHere() {
    return Set.of(SupportsSnapshots.class);
  }
}
