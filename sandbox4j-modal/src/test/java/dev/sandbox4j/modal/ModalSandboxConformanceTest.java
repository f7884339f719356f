package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/** The whole workspace contract through {@link ModalSandbox} against the fake Modal. */
class ModalSandboxConformanceTest extends WorkspaceConformanceSuite {

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

  /**
   * A registry image: the fake runs the local engine's image, whose own working directory is used.
   */
  static ModalSandbox.Builder client() {
    return clientOf(modal, home);
  }

  /** A client of {@code fake} whose sandboxes run the local engine's image (a registry tag). */
  static ModalSandbox.Builder clientOf(FakeModal fake, Path home) {
    return fake.client(home).image("debian:bookworm-slim");
  }

  @Override
  protected WorkspaceProvider provider() {
    return client().build();
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return client().beforeCreate(() -> SlowCreation.sleep(delay)).build().newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return client().env(env).build().newBackend();
  }
}
