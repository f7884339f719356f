package dev.sandbox4j.workspace.host;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.io.TempDir;

/** The whole contract against host-directory workspaces, which isolate nothing. */
class HostWorkspaceConformanceTest extends WorkspaceConformanceSuite {

  @TempDir Path root;

  @Override
  protected WorkspaceProvider provider() {
    return HostWorkspaceProvider.create(root);
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return HostWorkspaceProvider.builder().root(root).env(env).build().newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return HostWorkspaceProvider.builder()
        .root(root)
        .beforeCreate(() -> SlowCreation.sleep(delay))
        .build()
        .newBackend();
  }

  @Override
  protected boolean isolatesFromHost() {
    return false;
  }
}
