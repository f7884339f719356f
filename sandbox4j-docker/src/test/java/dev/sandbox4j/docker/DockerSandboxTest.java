package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.model.HostConfig;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The docker provider's own features against a real daemon: defaults, lifecycle, gc. */
class DockerSandboxTest {
  private static final String TAG = "docker-" + UUID.randomUUID().toString().substring(0, 8);
  private static DockerSandbox sandboxes;
  private final List<WorkspaceRef> made = new ArrayList<>();

  @BeforeAll
  static void requireDaemon() {
    DockerPrerequisites.requireDaemon();
    sandboxes =
        DockerSandbox.builder().label("sandbox4j.test", TAG).memory(512L << 20).pids(256).build();
  }

  @AfterEach
  void destroy() {
    made.forEach(sandboxes::destroy);
  }

  @AfterAll
  static void noContainerIsLeft() {
    List<String> left = DockerPrerequisites.containersLabelled(sandboxes, TAG);
    assertThat(left).as("containers the tests left behind").isEmpty();
  }

  private Workspace create() {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    made.add(ws.open());
    return ws;
  }

  private static String sh(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(script + " gave " + r).isZero();
    return r.stdoutText().strip();
  }

  private static InspectContainerResponse inspect(Workspace ws) {
    return sandboxes.inspect(ws.open().id());
  }

  @Test
  void theDefaultImageIsTheEnginesWithItsUserHomeAndSudo() {
    Workspace ws = create();
    assertThat(sh(ws, "id -un; pwd; echo $HOME"))
        .isEqualTo("sandbox\n/home/sandbox\n/home/sandbox");
    assertThat(sh(ws, "touch ~/mine && stat -c %U ~/mine ~")).isEqualTo("sandbox\nsandbox");
    assertThat(sh(ws, "sudo -n id -u"))
        .as("passwordless sudo, as in a local sandbox")
        .isEqualTo("0");
    assertThat(inspect(ws).getConfig().getImage()).startsWith(DockerSandbox.DEFAULT_IMAGE + ":");
  }

  @Test
  void containersGetTheSecurityDefaults() {
    Workspace ws = create();
    HostConfig host = inspect(ws).getHostConfig();
    assertThat(host.getPrivileged()).isFalse();
    assertThat(host.getInit()).isTrue();
    assertThat(host.getPidsLimit()).isEqualTo(256L);
    assertThat(host.getMemory()).isEqualTo(512L << 20);
    assertThat(host.getMemorySwap()).as("no swap beyond the memory limit").isEqualTo(512L << 20);
    assertThat(host.getBinds()).as("no host mounts").isNullOrEmpty();
    assertThat(inspect(ws).getMounts()).as("no host mounts").isNullOrEmpty();
    assertThat(host.getSecurityOpts()).as("Docker's default seccomp profile").isNullOrEmpty();
    assertConfinedFromInside("after create", ws);
  }

  /**
   * The confinement holds in every state a sandbox reaches, not only a fresh one: after
   * suspend+resume and stop+start, in a fork, and in a sandbox made from a snapshot (whose image
   * carries the parent's committed config).
   */
  @Test
  void theConfinementHoldsInEveryStateASandboxReaches() {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    sandboxes.suspend(ref);
    sandboxes.resume(ref);
    assertConfinedFromInside("after suspend and resume", ws);
    sandboxes.stop(ref);
    sandboxes.start(ref);
    assertConfinedFromInside("after stop and start", ws);

    WorkspaceRef child = sandboxes.forkFiles(ref).ref();
    made.add(child);
    assertConfinedFromInside("in a fork", Workspace.of(sandboxes.backend(child).orElseThrow()));

    String snapshot = "confined-" + TAG;
    sandboxes.snapshot(ref, snapshot);
    try {
      DockerSandbox fromSnapshot =
          DockerSandbox.builder()
              .label("sandbox4j.test", TAG)
              .memory(512L << 20)
              .pids(256)
              .snapshot(snapshot)
              .build();
      Workspace restored = Workspace.of(fromSnapshot.newBackend());
      made.add(restored.open());
      assertConfinedFromInside("from a snapshot", restored);
    } finally {
      sandboxes.removeSnapshot(snapshot);
    }
  }

  /** Seen from inside, as root (sudo): a seccomp filter, the engine's capabilities, no mounts. */
  private void assertConfinedFromInside(String where, Workspace ws) {
    HostConfig host = inspect(ws).getHostConfig();
    assertThat(host.getPrivileged()).as(where).isFalse();
    assertThat(host.getPidsLimit()).as(where).isEqualTo(256L);
    assertThat(host.getMemory()).as(where).isEqualTo(512L << 20);
    assertThat(host.getBinds()).as(where + ": no host mounts").isNullOrEmpty();
    assertThat(sh(ws, "sudo -n grep -E '^(Seccomp|CapBnd|CapEff):' /proc/self/status"))
        .as(where)
        .isEqualTo("CapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\nSeccomp:\t2");
    assertThat(sh(ws, "sudo -n mount -t tmpfs none /mnt 2>&1 || echo refused"))
        .as(where + ": a mount is refused")
        .endsWith("refused");
  }

  @Test
  void theImagesOwnUserAndDirectoryGiveWayToTheBuilders() {
    DockerSandbox custom =
        DockerSandbox.builder()
            .label("sandbox4j.test", TAG)
            .user("root")
            .workingDirectory("/tmp")
            .env("GREETING", "hi there")
            .build();
    Workspace ws = Workspace.of(custom.newBackend());
    made.add(ws.open());
    assertThat(sh(ws, "id -un; pwd; echo \"$GREETING\"")).isEqualTo("root\n/tmp\nhi there");
  }

  @Test
  void suspendPausesStopStopsAndAnyCommandWakesIt() {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    sh(ws, "nohup sleep 6017 >/dev/null 2>&1 &");
    sandboxes.suspend(ref);
    sandboxes.suspend(ref); // idempotent
    assertThat(inspect(ws).getState().getPaused()).isTrue();
    assertThat(sandboxes.info(ref).orElseThrow().state()).isEqualTo("suspended");
    assertThat(sandboxes.info(ref).orElseThrow().labels()).containsEntry("sandbox4j.test", TAG);
    assertThat(sh(ws, "echo awake")).isEqualTo("awake");
    assertThat(sandboxes.info(ref).orElseThrow().state()).isEqualTo("running");
    assertThat(inspect(ws).getState().getPaused()).isFalse();
    assertThat(sh(ws, "pgrep -c -f '^sleep 601[7]'"))
        .as("a suspended sandbox keeps its processes")
        .isEqualTo("1");

    sh(ws, "echo kept > note");
    sandboxes.stop(ref);
    sandboxes.stop(ref); // idempotent
    assertThat(inspect(ws).getState().getRunning()).isFalse();
    assertThat(sandboxes.info(ref).orElseThrow().state()).isEqualTo("stopped");
    assertThat(sh(ws, "cat note"))
        .as("stop keeps the files; a command starts it")
        .isEqualTo("kept");
    assertThat(sh(ws, "pgrep -c -f '^sleep 601[7]' || true"))
        .as("a fresh init after stop")
        .isEqualTo("0");

    sandboxes.stop(ref);
    sandboxes.start(ref);
    sandboxes.start(ref);
    sandboxes.resume(ref);
    assertThat(inspect(ws).getState().getRunning()).isTrue();
  }

  @Test
  void aRefAttachesFromAnotherProviderAndADestroyedOneIsUnavailable() {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    sh(ws, "echo one > f");
    Workspace again = Workspace.of(new DockerSandbox().backend(ref).orElseThrow());
    assertThat(sh(again, "cat f")).isEqualTo("one");
    sandboxes.destroy(ref);
    sandboxes.destroy(ref); // quiet when gone
    assertThatThrownBy(() -> again.run(Command.shell("true")))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> sandboxes.suspend(ref))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> sandboxes.backend(new WorkspaceRef("docker", "../etc")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("12 lowercase hex");
    assertThat(sandboxes.backend(new WorkspaceRef("local", "abc"))).isEmpty();
  }

  @Test
  void gcRemovesContainersWhoseCreatorDiedBeforeStartingThemAndNothingElse() throws Exception {
    Process dead = new ProcessBuilder("true").start();
    dead.waitFor();
    long deadStart = dead.info().startInstant().map(java.time.Instant::toEpochMilli).orElse(1L);
    String host = java.net.InetAddress.getLocalHost().getHostName();
    String orphan = "0123456789ab";
    String inFlight = "ba9876543210";
    createdOnly(orphan, host + "/" + dead.pid() + "/" + deadStart);
    long self = ProcessHandle.current().pid();
    long selfStart = ProcessHandle.current().info().startInstant().orElseThrow().toEpochMilli();
    createdOnly(inFlight, host + "/" + self + "/" + selfStart);
    Workspace running = create();
    try {
      List<String> removed = sandboxes.gc();
      assertThat(removed).contains(orphan).doesNotContain(inFlight, running.open().id());
      assertThatThrownBy(() -> sandboxes.inspect(orphan))
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThat(sandboxes.inspect(inFlight).getState().getStatus())
          .as("a creation this live JVM has under way is left alone")
          .isEqualTo("created");
      assertThat(sh(running, "echo still here"))
          .as("gc leaves running sandboxes")
          .isEqualTo("still here");
    } finally {
      sandboxes.destroy(new WorkspaceRef("docker", inFlight));
      sandboxes.destroy(new WorkspaceRef("docker", orphan));
    }
  }

  /**
   * A user whose machine cannot give the default image (not root: root's image store is not
   * readable and no store can be built; not Linux: none at all) gets the one already in the daemon,
   * imported before for anyone using it. Stood in for here by a state directory whose default image
   * cannot be read.
   */
  @Test
  void withoutADefaultImageInItsOwnStoreTheOneAlreadyInTheDaemonServes() throws Exception {
    String imported = DefaultDockerImage.ensure(sandboxes.daemon(), line -> {});
    Path home = Files.createTempDirectory("sandbox4j-no-store-");
    try {
      Path manifest = home.resolve("images").resolve("default").resolve("image.json");
      Files.createDirectories(manifest.getParent());
      Files.writeString(manifest, "{ not json");
      List<String> progress = new java.util.ArrayList<>();
      String used = DefaultDockerImage.ensure(sandboxes.daemon(), home, progress::add);
      assertThat(used)
          .as("the newest default image in the daemon")
          .isEqualTo(DefaultDockerImage.importedBefore(sandboxes.daemon()).orElseThrow())
          .startsWith(DefaultDockerImage.REPOSITORY + ":");
      assertThat(sandboxes.daemon().client().inspectImageCmd(used).exec().getConfig().getLabels())
          .as("a default image Sandbox4j imported (%s was, from this machine's store)", imported)
          .containsEntry(DefaultDockerImage.LABEL, "default");
      Workspace ws =
          Workspace.of(
              DockerSandbox.builder()
                  .image(used)
                  .label("sandbox4j.test", TAG)
                  .build()
                  .newBackend());
      made.add(ws.open());
      assertThat(sh(ws, "id -un; pwd")).isEqualTo("sandbox\n/home/sandbox");
      assertThat(progress)
          .singleElement(org.assertj.core.api.InstanceOfAssertFactories.STRING)
          .contains("already in the Docker daemon")
          .contains(home.toString())
          .contains("image default is damaged");
      progress.clear();
      Path empty = Files.createDirectory(home.resolve("empty"));
      assertThat(DefaultDockerImage.ensure(sandboxes.daemon(), empty, progress::add))
          .as("an image store of one's own, empty: nothing is built")
          .isEqualTo(used);
      assertThat(progress)
          .singleElement(org.assertj.core.api.InstanceOfAssertFactories.STRING)
          .contains("it has none");
    } finally {
      try (var files = Files.walk(home)) {
        for (Path p : files.sorted(java.util.Comparator.reverseOrder()).toList()) {
          Files.delete(p);
        }
      }
    }
  }

  private static void createdOnly(String id, String creator) {
    sandboxes
        .daemon()
        .client()
        .createContainerCmd(DefaultDockerImage.ensure(sandboxes.daemon(), line -> {}))
        .withName(sandboxes.containerName(id))
        .withCmd("true")
        .withLabels(
            Map.of(
                DockerSandbox.LABEL_ID,
                id,
                DockerSandbox.LABEL_CREATOR,
                creator,
                "sandbox4j.test",
                TAG))
        .exec();
  }

  @Test
  void withoutNetworkASandboxHasLoopbackOnlyAndReachesNothing() {
    DockerSandbox closed = DockerSandbox.builder().label("sandbox4j.test", TAG).noNetwork().build();
    Workspace ws = Workspace.of(closed.newBackend());
    made.add(ws.open());
    assertThat(sh(ws, "ls /sys/class/net")).isEqualTo("lo");
    String gateway =
        sh(
            create(),
            "ip route | awk '/default/ {print $3}'"); // the bridge's host side, from another
    assertThat(
            ws.run(Command.shell("curl -sS -m 3 http://" + gateway + "/ 2>&1; echo rc=$?"))
                .stdoutText())
        .contains("rc=7");
  }

  /**
   * A JVM killed with SIGKILL mid-command loses nothing: the sandbox stays, another JVM attaches by
   * ref and finds its files; the command it left running goes on inside (nothing could kill it),
   * and destroy ends it with the rest.
   */
  @Test
  void aSandboxOutlivesTheJvmKilledWhileItsCommandRan() throws Exception {
    java.nio.file.Path childErr = java.nio.file.Files.createTempFile("killed-jvm-child", ".err");
    Process child =
        new ProcessBuilder(
                java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                KilledJvmChild.class.getName(),
                TAG)
            .redirectError(childErr.toFile())
            .start();
    WorkspaceRef ref;
    try (var out =
        new java.io.BufferedReader(new java.io.InputStreamReader(child.getInputStream()))) {
      String line = out.readLine();
      assertThat(line)
          .as(
              "the child printed its sandbox's ref; its stderr: %s",
              java.nio.file.Files.readString(childErr))
          .isNotNull()
          .startsWith("docker:");
      ref = WorkspaceRef.parse(line.strip());
      made.add(ref);
      Workspace ws = Workspace.of(sandboxes.backend(ref).orElseThrow());
      long end = System.nanoTime() + 20_000_000_000L;
      while (!ws.exists("/tmp/long")) {
        assertThat(System.nanoTime()).as("the child's command started").isLessThan(end);
        Thread.sleep(20);
      }
      child.destroyForcibly().waitFor();

      assertThat(ws.readText("/home/sandbox/before-the-kill")).isEqualTo("written");
      assertThat(sh(ws, "echo alive")).isEqualTo("alive");
      assertThat(sh(ws, "pgrep -c -f '^sleep 601[7]'"))
          .as("the orphaned command goes on")
          .isEqualTo("1");
      assertThat(sandboxes.gc()).as("gc never takes a running sandbox").doesNotContain(ref.id());
      assertThat(sandboxes.info(ref).orElseThrow().state()).isEqualTo("running");
    } finally {
      child.destroyForcibly();
      java.nio.file.Files.deleteIfExists(childErr);
    }
  }

  /**
   * A disk quota is the daemon's storage-opt size: enforced where its storage driver can, and a
   * clear refusal where it cannot (overlay2 on ext4, as on this machine and CI's), never ignored.
   */
  @Test
  void aDiskQuotaIsEnforcedOrRefusedNeverIgnored() {
    DockerSandbox quota =
        DockerSandbox.builder().label("sandbox4j.test", TAG).disk(256L << 20).build();
    Workspace ws = Workspace.of(quota.newBackend());
    String driverFs =
        sandboxes.daemon().client().infoCmd().exec().getDriverStatuses().stream()
            .filter(pair -> pair.get(0).equals("Backing Filesystem"))
            .map(pair -> pair.get(1))
            .findFirst()
            .orElse("");
    if (driverFs.equals("extfs")) {
      assertThatThrownBy(ws::open)
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceException.class)
          .hasMessageContaining("cannot enforce one with its storage driver")
          .hasMessageContaining("xfs");
      assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG))
          .as("the refused container is removed")
          .isEmpty();
    } else {
      made.add(ws.open());
      CommandResult r = ws.run(Command.shell("head -c 300M /dev/zero > /tmp/big"));
      assertThat(r.exitCode()).as("a write past the quota fails").isNotZero();
    }
  }

  /** A daemon that does not answer (a stale socket, Docker stopped) is unavailable, by name. */
  @Test
  void aDaemonThatDoesNotAnswerIsUnavailableNamingWhere() {
    DockerSandbox nowhere =
        DockerSandbox.builder().host("unix:///tmp/sandbox4j-no-daemon.sock").build();
    assertThatThrownBy(() -> Workspace.of(nowhere.newBackend()).run(Command.shell("true")))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining(
            "cannot reach the Docker daemon at unix:///tmp/sandbox4j-no-daemon.sock");
    assertThatThrownBy(nowhere::list)
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("cannot reach the Docker daemon");
    assertThatThrownBy(nowhere::gc).isInstanceOf(WorkspaceUnavailableException.class);
    WorkspaceRef someRef = new WorkspaceRef("docker", "0123456789ab");
    assertThatThrownBy(
            () -> Workspace.of(nowhere.backend(someRef).orElseThrow()).run(Command.shell("true")))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> nowhere.suspend(someRef))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> nowhere.destroy(someRef))
        .isInstanceOf(WorkspaceUnavailableException.class);
  }

  @Test
  void aCommandThatKillsItselfIsAResultNotAnUnavailableSandbox() {
    Workspace ws = create();
    assertThat(ws.run(Command.shell("kill -9 $$")).exitCode()).isEqualTo(137);
    assertThat(sh(ws, "echo fine")).isEqualTo("fine");
  }
}
