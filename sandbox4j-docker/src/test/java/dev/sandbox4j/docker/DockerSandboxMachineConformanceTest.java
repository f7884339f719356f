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
 * The machine capabilities a docker sandbox has (listing, suspend, stop, files-only fork,
 * snapshots) against a real daemon; the sections of the others are skipped as not applicable.
 */
class DockerSandboxMachineConformanceTest extends MachineConformanceSuite {
  private static final String TAG = "machines-" + UUID.randomUUID().toString().substring(0, 8);
  private static DockerSandbox sandboxes;

  @BeforeAll
  static void requireDaemon() {
    DockerPrerequisites.requireDaemon();
    sandboxes = builder().build();
  }

  private static DockerSandbox.Builder builder() {
    return DockerSandbox.builder().label("sandbox4j.test", TAG);
  }

  /** Nothing leaks: no container of the suite's, and no fork or snapshot image of its own. */
  @AfterAll
  static void nothingIsLeft() {
    assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG))
        .as("containers the suite left behind")
        .isEmpty();
    assertThat(ourImages()).as("fork and snapshot images the suite left behind").isEmpty();
  }

  private static List<String> ourImages() {
    return DockerPrerequisites.imagesLabelled(sandboxes, TAG);
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
