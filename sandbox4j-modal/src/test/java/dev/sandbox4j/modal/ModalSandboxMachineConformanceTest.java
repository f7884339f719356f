package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/**
 * The machine capabilities' contract through {@link ModalSandbox} against the fake Modal: listing,
 * the one capability it declares (Modal sandboxes are not suspended, stopped, hibernated or forked
 * by its protocol; its filesystem snapshots and tunnels are {@link ModalSandbox}'s own methods,
 * covered by {@link ModalSandboxTest}).
 */
class ModalSandboxMachineConformanceTest extends MachineConformanceSuite {

  private static FakeModal modal;
  @TempDir static Path home;

  @BeforeAll
  static void startFake() {
    LocalEngine.require();
    modal = new FakeModal();
  }

  @AfterAll
  static void stopFake() {
    if (modal != null) {
      modal.close();
    }
  }

  @Override
  protected WorkspaceProvider provider() {
    return ModalSandboxConformanceTest.clientOf(modal, home).build();
  }
}
