package dev.sandbox4j.kubernetes;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The whole workspace contract through {@link KubernetesSandbox} in pod mode, against fabric8's
 * mock API server with the test-side kubelet of {@link FakeCluster}: every command, file operation
 * and kill goes through the pod exec WebSocket in the documented channel format. The fake's
 * commands run on this host, so the rules about isolation from the host cannot be checked here
 * ({@link #isolatesFromHost()} is false): they need a real cluster (docs/kubernetes.md).
 */
// a lost stdin frame (seen once in the fake, cause not found) must fail a test, not hang CI
@Timeout(60)
class KubernetesSandboxConformanceTest extends WorkspaceConformanceSuite {

  private static FakeCluster cluster;
  @TempDir static Path node;

  @BeforeAll
  static void startCluster() {
    cluster = new FakeCluster(node, false);
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  static KubernetesSandbox.Builder client() {
    return KubernetesSandbox.builder().client(cluster.client).namespace("conformance");
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

  @Override
  protected boolean isolatesFromHost() {
    return false;
  }
}
