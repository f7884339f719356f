package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What the docker provider does differently on Podman, against its service: the confinement (no
 * capability for the sandbox user, root's no wider than on Docker), the limits it sets, the default
 * image's name, and image removal that never takes a sandbox's container with it.
 */
class PodmanSandboxTest {
  private static final String TAG = "podman-own-" + UUID.randomUUID().toString().substring(0, 8);

  /** Docker's 14 default capabilities, as the engine and the Docker provider give them. */
  private static final long DOCKERS = 0xa80425fbL;

  private static DockerSandbox sandboxes;
  private static List<String> imagesBefore;
  private final List<WorkspaceRef> made = new ArrayList<>();

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
        .label("sandbox4j.test", TAG)
        .memory(512L << 20)
        .pids(256);
  }

  @AfterEach
  void destroy() {
    made.forEach(sandboxes::destroy);
  }

  @AfterAll
  static void nothingIsLeft() {
    assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG))
        .as("containers the tests left behind")
        .isEmpty();
    assertThat(DockerPrerequisites.imagesLabelled(sandboxes, TAG))
        .as("snapshot images")
        .isEqualTo(imagesBefore);
  }

  private Workspace create(DockerSandbox from) {
    Workspace ws = Workspace.of(from.newBackend());
    made.add(ws.open());
    return ws;
  }

  private static String sh(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(script + " gave " + r).isZero();
    return r.stdoutText().strip();
  }

  /**
   * Podman makes every capability named in CapAdd effective and ambient for a non-root user, so the
   * provider adds none there: the sandbox user has no capability at all (it could otherwise write a
   * file it may not, with CAP_DAC_OVERRIDE), and root's are Podman's default set narrowed to
   * Docker's.
   */
  @Test
  void theSandboxUserHasNoCapabilityAndRootNoneBeyondDockers() {
    Workspace ws = create(sandboxes);
    assertThat(sh(ws, "id -un; grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status"))
        .isEqualTo(
            "sandbox\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
                + "CapAmb:\t0000000000000000");
    assertThat(
            sh(
                ws,
                "echo x > mine && chmod 444 mine && (echo y > mine) 2>/dev/null || echo refused"))
        .as("a read-only file stays read-only to its owner")
        .isEqualTo("refused");
    String[] root =
        sh(ws, "sudo -n sh -c 'grep -E \"^(CapBnd|Seccomp):\" /proc/self/status'").split("\n");
    long bounding = Long.parseUnsignedLong(root[0].substring("CapBnd:\t".length()), 16);
    assertThat(bounding & ~DOCKERS).as("root's capabilities beyond Docker's").isZero();
    assertThat(root[1]).as("Podman's default seccomp profile").isEqualTo("Seccomp:\t2");
    assertThat(sh(ws, "sudo -n mount -t tmpfs none /mnt 2>&1 || echo refused"))
        .as("a mount is refused")
        .endsWith("refused");
  }

  /**
   * Podman's own limits (1048576 open files and processes) cannot be set where root lacks
   * CAP_SYS_RESOURCE, so the provider sets its own: 1024 open files raisable to 4096, and processes
   * at least 4096 (a per-uid limit; the pids limit bounds the sandbox). The hard limits are the
   * provider's; the soft open-files limit of a command is Podman's choice: its API exec gives the
   * command the service's own soft limit, capped by the container's hard one (measured: a service
   * started with a soft limit of 1024 gives 1024, one started with 20000 gives 4096), while the
   * container's own processes keep 1024.
   */
  @Test
  void theLimitsAreTheProvidersAndThePidsLimitHolds() {
    Workspace ws = create(sandboxes);
    assertThat(
            sh(
                ws,
                "awk '/^Max (processes|open files) / {print $(NF-2), $(NF-1)}' /proc/self/limits"))
        .as("soft and hard: processes, then open files (soft: the Podman service's, up to hard)")
        .matches("4096 4096\n(1024|[0-9]{4}) 4096")
        .satisfies(
            limits -> {
              long soft = Long.parseLong(limits.lines().toList().get(1).split(" ")[0]);
              assertThat(soft).isBetween(1024L, 4096L);
            });
    assertThat(sh(ws, "awk '/^Max open files / {print $(NF-2), $(NF-1)}' /proc/1/limits"))
        .as("the container's init: the provider's soft and hard open files")
        .isEqualTo("1024 4096");
    assertThat(sandboxes.inspect(ws.open().id()).getHostConfig().getPidsLimit()).isEqualTo(256L);
  }

  /** Podman ignores the import's {@code tag}: the provider names the image in {@code repo}. */
  @Test
  void theDefaultImageIsImportedUnderItsLayersTag() {
    Workspace ws = create(sandboxes);
    String image = sandboxes.info(ws.open()).orElseThrow().image();
    assertThat(image).startsWith(DockerSandbox.DEFAULT_IMAGE + ":").doesNotEndWith(":latest");
    assertThat(sh(ws, "id -un; pwd")).isEqualTo("sandbox\n/home/sandbox");
  }

  /**
   * Podman's forced removal of an image removes the containers made from it: removing a snapshot
   * (and a fork's passing image) must leave those sandboxes running with their files.
   */
  @Test
  void removingASnapshotOrForkingKeepsTheSandboxesMadeFromIt() {
    Workspace parent = create(sandboxes);
    WorkspaceRef parentRef = parent.open();
    sh(parent, "echo saved > note");
    WorkspaceRef child = sandboxes.forkFiles(parentRef).ref();
    made.add(child);
    String snapshot = "kept-" + TAG;
    sandboxes.snapshot(parentRef, snapshot);
    Workspace restored;
    try {
      restored = create(builder().snapshot(snapshot).build());
    } finally {
      assertThat(sandboxes.removeSnapshot(snapshot)).isTrue();
    }
    assertThat(sandboxes.snapshots()).noneMatch(s -> s.name().equals(snapshot));
    assertThat(sandboxes.removeSnapshot(snapshot)).as("removed once").isFalse();
    assertThat(sh(restored, "cat note")).as("made from the removed snapshot").isEqualTo("saved");
    Workspace forked = Workspace.of(sandboxes.backend(child).orElseThrow());
    assertThat(sh(forked, "cat note")).as("the fork").isEqualTo("saved");
  }

  /** gc reads Podman's states as Docker's: a never-started container of a dead JVM goes. */
  @Test
  void gcRemovesAContainerWhoseCreatorDiedBeforeStartingIt() throws Exception {
    Process dead = new ProcessBuilder("true").start();
    dead.waitFor();
    long deadStart = dead.info().startInstant().map(java.time.Instant::toEpochMilli).orElse(1L);
    String host = java.net.InetAddress.getLocalHost().getHostName();
    String orphan = "0123456789ab";
    sandboxes
        .daemon()
        .client()
        .createContainerCmd(DefaultDockerImage.ensure(sandboxes.daemon(), line -> {}))
        .withName(sandboxes.containerName(orphan))
        .withCmd("true")
        .withLabels(
            java.util.Map.of(
                DockerSandbox.LABEL_ID,
                orphan,
                DockerSandbox.LABEL_CREATOR,
                host + "/" + dead.pid() + "/" + deadStart,
                "sandbox4j.test",
                TAG))
        .exec();
    try {
      assertThat(sandboxes.gc()).contains(orphan);
      assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG)).isEmpty();
    } finally {
      sandboxes.destroy(new WorkspaceRef("docker", orphan));
    }
  }

  @Test
  void theEgressNetworkIsRefusedOnPodmanNamingTheChoicesAndNothingIsMade() {
    DockerSandbox egress =
        DockerSandbox.builder()
            .host(DockerPrerequisites.PODMAN_HOST)
            .label("sandbox4j.test", TAG)
            .build();
    assertThatThrownBy(() -> Workspace.of(egress.newBackend()).open())
        .isInstanceOf(dev.sandbox4j.workspace.WorkspaceException.class)
        .hasMessageContaining("is Podman")
        .hasMessageContaining("egress(EgressPolicy.none())")
        .hasMessageContaining("bridgeNetwork()");
    assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG)).isEmpty();
    assertThat(
            sandboxes.daemon().client().listNetworksCmd().withNameFilter(DockerNetwork.NAME).exec())
        .as("no egress network made on Podman")
        .isEmpty();
  }

  @Test
  void withoutNetworkASandboxHasLoopbackOnly() {
    Workspace ws = create(builder().noNetwork().build());
    assertThat(sh(ws, "ls /sys/class/net")).isEqualTo("lo");
  }

  /**
   * On Podman a command writes through FIFO relays (DockerWorkspace.RELAYED): a background server
   * that logs to its stdout outlives the command's return, and with no writable temporary directory
   * for the FIFOs the command still runs, exec'd directly.
   */
  @Test
  void aBackgroundServerLoggingToStdoutSurvivesAndNoTempDirectoryStillRuns() throws Exception {
    Workspace ws = create(sandboxes);
    CommandResult started =
        ws.run(
            Command.shell(
                "(while :; do echo tick; sleep 0.1; done) & echo $! > server.pid; echo started"));
    assertThat(started.exitCode()).isZero();
    assertThat(started.stdoutText()).contains("started\n").contains("tick\n");
    assertThat(sh(ws, "sleep 0.5; kill -0 $(cat server.pid) && echo alive"))
        .as("it went on writing after the run returned")
        .isEqualTo("alive");

    CommandResult direct =
        ws.run(
            Command.shell("echo out; echo err >&2; exit 3"),
            dev.sandbox4j.workspace.RunOptions.builder().env("TMPDIR", "/proc").build());
    assertThat(direct.exitCode()).isEqualTo(3);
    assertThat(direct.stdoutText()).isEqualTo("out\n");
    assertThat(direct.stderrText()).isEqualTo("err\n");
  }
}
