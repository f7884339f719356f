package dev.sandbox4j.docker;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Whether a Docker daemon (or Podman's service) answers here (skips elsewhere, fails under {@code
 * CI=true}), and the leak checks of the tests that use one. Public in the test-jar: other modules'
 * tests on docker (the server's) require a daemon the same way.
 */
public final class DockerPrerequisites {
  /**
   * Where {@code .ci/run} starts Podman's Docker-compatible service ({@code podman system
   * service}).
   */
  static final String PODMAN_HOST = "unix:///run/podman/podman.sock";

  private DockerPrerequisites() {}

  /**
   * The containers of {@code daemonOf}'s daemon labelled {@code sandbox4j.test=tag}: a leak check.
   */
  public static List<String> containersLabelled(DockerSandbox daemonOf, String tag) {
    return daemonOf
        .daemon()
        .client()
        .listContainersCmd()
        .withShowAll(true)
        .withLabelFilter(Map.of("sandbox4j.test", tag))
        .exec()
        .stream()
        .map(c -> Arrays.toString(c.getNames()))
        .toList();
  }

  /**
   * The images of {@code daemonOf}'s daemon that carry the label {@code sandbox4j.test=tag}: those
   * committed from the test's sandboxes (a commit keeps its container's labels), snapshots by name
   * as Docker writes it and unnamed ones (a fork's, a removed snapshot's still in use) by id. A
   * leak check.
   */
  static List<String> imagesLabelled(DockerSandbox daemonOf, String tag) {
    return daemonOf
        .daemon()
        .client()
        .listImagesCmd()
        .withLabelFilter(Map.of("sandbox4j.test", tag))
        .exec()
        .stream()
        .flatMap(
            i ->
                i.getRepoTags() == null
                        || i.getRepoTags().length == 0
                        || List.of(i.getRepoTags()).equals(List.of("<none>:<none>"))
                    ? Stream.of("unnamed " + i.getId())
                    : Arrays.stream(i.getRepoTags()).map(SandboxImages::shortName))
        .sorted()
        .toList();
  }

  /** Skips the test without a Docker daemon that answers; fails it under {@code CI=true}. */
  public static void requireDaemon() {
    String why;
    try {
      DockerHosts.Found found = DockerHosts.discover();
      why = answers(found, "the Docker daemon");
    } catch (RuntimeException e) {
      why = e.getMessage();
    }
    Prerequisites.require(why == null, "a Docker daemon (" + why + ")");
  }

  /** Podman's Docker-compatible service at {@link #PODMAN_HOST}, and that it is Podman. */
  static void requirePodman() {
    DockerHosts.Found found =
        DockerHosts.discover(Map.of("DOCKER_HOST", PODMAN_HOST), java.nio.file.Path.of("/"));
    String why = answers(found, "Podman ('podman system service --time=0 " + PODMAN_HOST + "')");
    if (why == null) {
      try (Daemon daemon = new Daemon(found)) {
        if (!daemon.podman()) {
          why = PODMAN_HOST + " answers, but it is not Podman";
        }
      }
    }
    Prerequisites.require(why == null, "Podman's service at " + PODMAN_HOST + " (" + why + ")");
  }

  /** Null if the daemon at {@code found} answers a ping, else why not. */
  private static String answers(DockerHosts.Found found, String what) {
    try (Daemon daemon = new Daemon(found)) {
      daemon.client().pingCmd().exec();
      return null;
    } catch (RuntimeException e) {
      return what + " at " + found.host() + " does not answer: " + e.getMessage();
    }
  }
}
