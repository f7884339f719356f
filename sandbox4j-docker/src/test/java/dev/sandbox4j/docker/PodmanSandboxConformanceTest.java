package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The whole workspace contract against containers of Podman's Docker-compatible service, as {@link
 * DockerSandboxConformanceTest} runs it against Docker.
 */
class PodmanSandboxConformanceTest extends WorkspaceConformanceSuite {
  private static final String TAG = "podman-" + UUID.randomUUID().toString().substring(0, 8);
  private static DockerSandbox sandboxes;

  @BeforeAll
  static void requirePodman() {
    DockerPrerequisites.requirePodman();
    sandboxes = builder().build();
  }

  private static DockerSandbox.Builder builder() {
    return DockerSandbox.builder()
        .host(DockerPrerequisites.PODMAN_HOST)
        .bridgeNetwork() // Podman has no egress network (PodmanSandboxTest checks the refusal)
        .label("sandbox4j.test", TAG);
  }

  /** Nothing leaks: every container the suite made is gone once it has run. */
  @AfterAll
  static void noContainerIsLeft() {
    List<String> left = DockerPrerequisites.containersLabelled(sandboxes, TAG);
    assertThat(left).as("containers the suite left behind").isEmpty();
  }

  @Override
  protected WorkspaceProvider provider() {
    return sandboxes;
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return builder().beforeCreate(() -> SlowCreation.sleep(delay)).build().newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return builder().env(env).build().newBackend();
  }
}
