package dev.sandbox4j.docker;

import dev.sandbox4j.workspace.conformance.Prerequisites;

/** Whether a Docker daemon answers here (skips elsewhere, fails under {@code CI=true}). */
final class DockerPrerequisites {
  private DockerPrerequisites() {}

  static void requireDaemon() {
    String why;
    try {
      DockerHosts.Found found = DockerHosts.discover();
      try (Daemon daemon = new Daemon(found)) {
        daemon.client().pingCmd().exec();
        return;
      } catch (RuntimeException e) {
        why = "the Docker daemon at " + found.host() + " does not answer: " + e.getMessage();
      }
    } catch (RuntimeException e) {
      why = e.getMessage();
    }
    Prerequisites.require(false, "a Docker daemon (" + why + ")");
  }
}
