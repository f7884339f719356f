package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;

/** The whole workspace contract against real local sandboxes under gVisor. */
class GvisorSandboxConformanceTest extends WorkspaceConformanceSuite {

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
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return LocalSandbox.builder()
        .isolation(Isolation.GVISOR)
        .beforeCreate(() -> SlowCreation.sleep(delay))
        .build()
        .newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return LocalSandbox.builder().isolation(Isolation.GVISOR).env(env).build().newBackend();
  }
}
