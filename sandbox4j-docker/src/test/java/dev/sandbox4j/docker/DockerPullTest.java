package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.RegistryImages;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.TestRegistry;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 16 and 20 together: a docker sandbox's image that the daemon does not have is pulled on the
 * first create, as {@code docker run} does; and a local sandbox's snapshot pushed to a registry
 * ({@code LocalSandbox.pushImage}) is how it moves into the Docker backend. A real registry on
 * loopback ({@link TestRegistry}), which dockerd speaks plain HTTP to as it does to every
 * 127.0.0.0/8 registry.
 */
class DockerPullTest {
  private static final String TAG = "docker-pull-" + UUID.randomUUID().toString().substring(0, 8);

  @TempDir Path temp;

  @Test
  void anImageTheDaemonLacksIsPulledAndALocalSnapshotMovesIntoDocker() throws Exception {
    DockerPrerequisites.requireDaemon();
    Prerequisites.requireLocalEngine();
    TestImages.requireBusybox();
    TestRegistry.requireRegistry();
    Path home = TestImages.privateHome(temp);
    LocalSandbox local = LocalSandbox.builder().home(home).build();
    List<String> pulled = new ArrayList<>();
    List<String> progress = new java.util.concurrent.CopyOnWriteArrayList<>();
    DockerSandbox docker = null;
    try (TestRegistry registry =
        TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS)) {
      RegistryImages.Configured configured =
          RegistryImages.configured(temp.resolve("image"), RegistryImages.NUMERIC_USER);
      String image = registry.host() + "/apps/tool:" + TAG;
      registry.push(configured.image().layout(), "apps/tool:" + TAG);
      pulled.add(image);

      docker = DockerSandbox.builder().label("sandbox4j.test", TAG).progress(progress::add).build();
      DockerSandbox onImage =
          DockerSandbox.builder()
              .label("sandbox4j.test", TAG)
              .image(image)
              .progress(progress::add)
              .build();
      Workspace fromRegistry = Workspace.of(onImage.newBackend());
      try {
        assertThat(sh(fromRegistry, "cat hello.txt; id -u; echo $GREETING"))
            .as("the image's WorkingDir, User and Env")
            .isEqualTo("hello from /srv/app\n1234\nhello\n");
        assertThat(progress).anyMatch(l -> l.startsWith("pulling " + image));
      } finally {
        fromRegistry.ref().ifPresent(onImage::destroy);
      }

      // A local sandbox's work, snapshotted and pushed, then a docker sandbox on it.
      LocalSandbox onLocal = LocalSandbox.builder().home(home).image(image).build();
      Workspace source = Workspace.of(onLocal.newBackend());
      sh(source, "echo made locally > /tmp/moved.txt");
      WorkspaceRef ref = source.ref().orElseThrow();
      onLocal.snapshot(ref, "moving");
      onLocal.destroy(ref);
      String snapshot = registry.host() + "/snaps/moving:" + TAG;
      local.pushImage("moving", snapshot);
      pulled.add(snapshot);
      DockerSandbox onSnapshot =
          DockerSandbox.builder().label("sandbox4j.test", TAG).image(snapshot).build();
      Workspace moved = Workspace.of(onSnapshot.newBackend());
      try {
        assertThat(sh(moved, "cat /tmp/moved.txt; id -u; pwd"))
            .isEqualTo("made locally\n1234\n/srv/app\n");
      } finally {
        moved.ref().ifPresent(onSnapshot::destroy);
      }
    } finally {
      for (String image : pulled) {
        new ProcessBuilder("docker", "rmi", "-f", image)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start()
            .waitFor();
      }
      TestImages.destroyAllAndDelete(local, home);
      if (docker != null) {
        assertThat(DockerPrerequisites.containersLabelled(docker, TAG))
            .as("containers the test left behind")
            .isEmpty();
      }
    }
  }

  private static String sh(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(script + " gave " + r).isZero();
    return r.stdoutText();
  }
}
