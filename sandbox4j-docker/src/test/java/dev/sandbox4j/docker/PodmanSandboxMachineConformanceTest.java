package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The machine capabilities of a docker sandbox against Podman's Docker-compatible service, as
 * {@link DockerSandboxMachineConformanceTest} runs them against Docker.
 */
class PodmanSandboxMachineConformanceTest extends MachineConformanceSuite {
  private static final String TAG =
      "podman-machines-" + UUID.randomUUID().toString().substring(0, 8);
  private static DockerSandbox sandboxes;
  private static List<String> imagesBefore;

  @BeforeAll
  static void requirePodman() {
    DockerPrerequisites.requirePodman();
    sandboxes = builder().build();
    imagesBefore = DockerPrerequisites.imagesLabelled(sandboxes, TAG);
  }

  private static DockerSandbox.Builder builder() {
    return DockerSandbox.builder()
        .host(DockerPrerequisites.PODMAN_HOST)
        .bridgeNetwork() // Podman has no egress network (PodmanSandboxTest checks the refusal)
        .label("sandbox4j.test", TAG);
  }

  /** Nothing leaks: no container of the suite's, and no fork or snapshot image more than before. */
  @AfterAll
  static void nothingIsLeft() {
    assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG))
        .as("containers the suite left behind")
        .isEmpty();
    assertThat(DockerPrerequisites.imagesLabelled(sandboxes, TAG))
        .as("fork and snapshot images")
        .isEqualTo(imagesBefore);
  }

  /** On Podman the provider's sandboxes have no egress network: no policy, no port URLs. */
  @Override
  protected java.util.Set<Class<?>> notApplicableHere() {
    return java.util.Set.of(
        dev.sandbox4j.workspace.machine.SupportsEgress.class,
        dev.sandbox4j.workspace.machine.SupportsPorts.class);
  }

  @Override
  protected WorkspaceProvider provider() {
    return sandboxes;
  }

  @Override
  protected WorkspaceBackend newBackendFromSnapshot(String name) {
    return builder().snapshot(name).build().newBackend();
  }
}
