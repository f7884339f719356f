package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The whole workspace contract against local sandboxes handed out by a warm pool (those the suite
 * makes faster than the pool refills are created afresh, as without one).
 */
class WarmPoolConformanceTest extends WorkspaceConformanceSuite {

  private static final LocalSandbox SANDBOXES = LocalSandbox.builder().warmPool(2).build();

  @BeforeAll
  static void requireEngine() {
    Prerequisites.requireLocalEngine();
  }

  @AfterAll
  static void closePool() {
    SANDBOXES.close();
  }

  @Override
  protected WorkspaceProvider provider() {
    return SANDBOXES;
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return LocalSandbox.builder()
        .beforeCreate(() -> SlowCreation.sleep(delay))
        .build()
        .newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return LocalSandbox.builder().env(env).build().newBackend();
  }
}
