package dev.sandbox4j.docker;

import dev.sandbox4j.workspace.conformance.Prerequisites;

/**
 * Whether a Docker daemon answers here (skips elsewhere, fails under {@code CI=true}). Public in
 * the test-jar: other modules' tests on docker (the server's) require a daemon the same way.
 */
public final class DockerPrerequisites {
  private DockerPrerequisites() {}

  /**
   * The containers of {@code daemonOf}'s daemon labelled {@code sandbox4j.test=tag}: a leak check.
   */
  public static java.util.List<String> containersLabelled(DockerSandbox daemonOf, String tag) {
    return daemonOf
        .daemon()
        .client()
        .listContainersCmd()
        .withShowAll(true)
        .withLabelFilter(java.util.Map.of("sandbox4j.test", tag))
        .exec()
        .stream()
        .map(c -> java.util.Arrays.toString(c.getNames()))
        .toList();
  }

  /** Skips the test without a Docker daemon that answers; fails it under {@code CI=true}. */
  public static void requireDaemon() {
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
