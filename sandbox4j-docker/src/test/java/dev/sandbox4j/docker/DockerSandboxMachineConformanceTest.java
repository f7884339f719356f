package dev.sandbox4j.docker;

import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.MachineConformanceSuite;
import org.junit.jupiter.api.BeforeAll;

/**
 * The machine capabilities a docker sandbox has (listing, suspend, stop) against a real daemon; the
 * sections of the others are skipped as not applicable.
 */
class DockerSandboxMachineConformanceTest extends MachineConformanceSuite {
  private static DockerSandbox sandboxes;

  @BeforeAll
  static void requireDaemon() {
    DockerPrerequisites.requireDaemon();
    sandboxes = DockerSandbox.builder().label("sandbox4j.test", "machines").build();
  }

  @Override
  protected WorkspaceProvider provider() {
    return sandboxes;
  }
}
