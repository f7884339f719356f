package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceProvider;
import org.junit.jupiter.api.AfterAll;

/**
 * The whole workspace contract against local sandboxes handed out by a warm pool (those the suite
 * makes faster than the pool refills are created afresh, as without one); the rest as {@link
 * LocalSandboxConformanceTest}.
 */
class WarmPoolConformanceTest extends LocalSandboxConformanceTest {

  private static final LocalSandbox SANDBOXES = LocalSandbox.builder().warmPool(2).build();

  @AfterAll
  static void closePool() {
    SANDBOXES.close();
  }

  @Override
  protected WorkspaceProvider provider() {
    return SANDBOXES;
  }
}
