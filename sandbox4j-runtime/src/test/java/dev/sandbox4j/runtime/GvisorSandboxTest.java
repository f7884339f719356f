package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What gVisor isolation adds to the conformance suites ({@link GvisorSandboxConformanceTest},
 * {@link GvisorSandboxMachineConformanceTest}): the code runs on gVisor's kernel, in every state a
 * sandbox reaches (create, suspend, stop and start, fork), the sandbox keeps its isolation, and
 * what gVisor sandboxes cannot do fails saying so.
 */
class GvisorSandboxTest {
  private static final String LABEL = "sandbox4j.test";
  private static final String TAG = "gvisor-" + UUID.randomUUID().toString().substring(0, 8);

  /** The release gVisor's kernel reports; the host's is a real Linux release. */
  private static final String GVISOR_RELEASE = "4.4.0";

  private static LocalSandbox sandboxes;
  private final List<WorkspaceRef> created = new ArrayList<>();

  @BeforeAll
  static void setUp() {
    Prerequisites.requireGvisor();
    sandboxes =
        LocalSandbox.builder()
            .isolation(Isolation.GVISOR)
            .label(LABEL, TAG)
            .progress(line -> {})
            .build();
  }

  @AfterEach
  void cleanUp() {
    for (WorkspaceRef ref : created) {
      sandboxes.destroy(ref);
    }
  }

  private Workspace create() {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    created.add(ws.open());
    return ws;
  }

  private static String sh(Workspace ws, String script) {
    var r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(script + ": " + r.stderrText()).isZero();
    return r.stdoutText().strip();
  }

  private static void assertOnGvisor(Workspace ws, String where) {
    assertThat(sh(ws, "uname -r")).as(where + ": the kernel is gVisor's").isEqualTo(GVISOR_RELEASE);
  }

  private static SandboxRecord record(WorkspaceRef ref) throws Exception {
    return SandboxRecord.read(
        LocalSandbox.DEFAULT_HOME.resolve("sandboxes").resolve(ref.id()).resolve("state.json"));
  }

  @Test
  void runsOnGvisorsKernelAsTheSandboxUserAndSaysSoInItsRecord() throws Exception {
    Workspace ws = create();
    assertOnGvisor(ws, "after create");
    assertThat(sh(ws, "id -un; pwd")).isEqualTo("sandbox\n/home/sandbox");
    // gVisor does not implement set-user-ID executables (google/gvisor#5299): sudo cannot work
    var sudo = ws.run(Command.shell("sudo -n id -u"));
    assertThat(sudo.exitCode()).isNotZero();
    assertThat(sudo.stderrText()).contains("no new privileges");
    assertThat(record(ws.open()).isolation()).isEqualTo(Isolation.GVISOR);
    // a crun sandbox of the same engine runs on the host's kernel
    LocalSandbox containers = LocalSandbox.builder().label(LABEL, TAG).build();
    Workspace container = Workspace.of(containers.newBackend());
    try {
      assertThat(sh(container, "uname -r")).isNotEqualTo(GVISOR_RELEASE);
      assertThat(record(container.open()).isolation()).isEqualTo(Isolation.CONTAINER);
    } finally {
      containers.destroy(container.open());
    }
  }

  @Test
  void suspendKeepsItsProcessesAndStopAndStartKeepItsIsolation() {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    sh(ws, "nohup sleep 600 >/dev/null 2>&1 & echo $! > bg.pid");
    sandboxes.suspend(ref);
    sandboxes.resume(ref);
    assertThat(sh(ws, "kill -0 $(cat bg.pid) && echo alive")).isEqualTo("alive");
    assertOnGvisor(ws, "after suspend and resume");

    sandboxes.stop(ref);
    sandboxes.start(ref);
    assertOnGvisor(ws, "after stop and start");
    assertThat(ws.readText("bg.pid")).isNotBlank();
  }

  @Test
  void aForkIsAGvisorSandboxWithItsParentsFilesOnlyAndSaysWhy() {
    Workspace parent = create();
    parent.writeText("note.txt", "from the parent");
    ForkResult fork = sandboxes.fork(parent.open());
    created.add(fork.ref());
    assertThat(fork.processesCopied()).isFalse();
    assertThat(fork.reason()).contains("not supported with gVisor isolation");
    Workspace child = Workspace.of(sandboxes.backend(fork.ref()).orElseThrow());
    assertThat(child.readText("note.txt")).isEqualTo("from the parent");
    assertOnGvisor(child, "in the fork");
  }

  @Test
  void hibernateFailsSayingGvisorCannotAndTheSandboxRunsOn() {
    Workspace ws = create();
    sh(ws, "nohup sleep 600 >/dev/null 2>&1 & echo $! > bg.pid");
    assertThatThrownBy(() -> sandboxes.hibernate(ws.open()))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("not supported with gVisor isolation");
    assertThat(sh(ws, "kill -0 $(cat bg.pid) && echo alive")).isEqualTo("alive");
  }

  /**
   * A timeout kills a command's tree and nothing else: not the sandbox's init, not another
   * command's background process. Killing the subreaper together with its descendants made gVisor
   * kill every process of the sandbox (a dying process whose subreaper was exiting found no one to
   * take its children): the conformance suite saw the Sentry gone after one kill in three.
   */
  @Test
  void aKilledTreeNeverTakesTheSandboxOrAnotherCommandsProcessWithIt() {
    Workspace ws = create();
    sh(ws, "nohup sleep 600 >/dev/null 2>&1 & echo $! > bg.pid");
    String deep =
        "sh -c 'sh -c \"sleep 300 & sleep 300\" & sleep 300' & "
            + "setsid sh -c 'sleep 300 & sleep 300' & sleep 300";
    for (int i = 0; i < 5; i++) {
      assertThatThrownBy(
              () ->
                  ws.run(
                      Command.shell(deep),
                      dev.sandbox4j.workspace.RunOptions.withTimeout(
                          java.time.Duration.ofMillis(800))))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceTimeoutException.class);
      assertThat(sh(ws, "echo up")).as("kill " + i + " left the sandbox up").isEqualTo("up");
      assertThat(sh(ws, "kill -0 $(cat bg.pid) && echo alive"))
          .as("kill " + i + " left the other command's process alone")
          .isEqualTo("alive");
      assertThat(sh(ws, "ps -eo args= | grep -c '^sleep 300$' || true"))
          .as("kill " + i + " left none of the tree's processes")
          .isEqualTo("0");
    }
  }

  /**
   * Named networks under gVisor: the Sentry's sockets are the host kernel's in the sandbox's own
   * network namespace, so the engine's veth, /etc/hosts and forwarding rules apply as for crun.
   */
  @Test
  void gvisorSandboxesOnANamedNetworkTalkByNameAndAnIsolatedOneReachesNeither() throws Exception {
    String net = "gv" + TAG.substring(TAG.length() - 6);
    LocalSandbox onNet =
        LocalSandbox.builder().isolation(Isolation.GVISOR).label(LABEL, TAG).network(net).build();
    Workspace a = Workspace.of(onNet.newBackend());
    created.add(a.open());
    Workspace b = Workspace.of(onNet.newBackend());
    created.add(b.open());
    Workspace isolated = create();
    sh(b, "nohup python3 -m http.server 8080 >/dev/null 2>&1 &");
    for (int i = 0; i < 50 && !connect(b, "127.0.0.1").equals("ok"); i++) {
      Thread.sleep(100);
    }
    assertThat(connect(a, b.open().id())).as("a reaches b by its id as host name").isEqualTo("ok");
    String addressOfB = sh(b, "getent hosts " + b.open().id() + " | cut -d' ' -f1");
    assertThat(connect(isolated, addressOfB)).isNotEqualTo("ok");
  }

  private static String connect(Workspace ws, String host) {
    String script =
        "import socket,sys\n"
            + "try:\n"
            + "  socket.create_connection((sys.argv[1], 8080), timeout=3); print('ok')\n"
            + "except Exception as e:\n"
            + "  print(type(e).__name__)\n";
    return ws.run(Command.argv("python3", "-c", script, host)).stdoutText().strip();
  }

  /**
   * What the supervisor's timers read of a sandbox (its processes, whether one is runnable, its CPU
   * time) sees a gVisor sandbox too: runsc joins only the v1 hierarchies of a hybrid host, where
   * the engine reads them from v2, so a spinning gVisor sandbox looked idle.
   */
  @Test
  void theEngineSeesAGvisorSandboxsProcessesAndCpu() throws Exception {
    Workspace ws = create();
    String id = ws.open().id();
    var cgroups = sandboxes.engine().cgroups();
    assertThat(cgroups.pids(id)).as("the Sentry and gofer, on the host").isNotEmpty();
    long before = cgroups.cpuUsageMicros(id).orElseThrow();
    sh(ws, "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &");
    boolean runnable = false;
    for (int i = 0; i < 100 && !runnable; i++) {
      runnable = cgroups.anyRunnable(id);
      Thread.sleep(20);
    }
    assertThat(runnable).as("a spinning sandbox has a runnable process").isTrue();
    Thread.sleep(300);
    assertThat(cgroups.cpuUsageMicros(id).orElseThrow() - before)
        .as("its CPU time grows")
        .isGreaterThan(100_000);
  }

  @Test
  void filesWrittenFromTheHostAndFromInsideAgree() {
    Workspace ws = create();
    ws.writeText("a.txt", "one");
    assertThat(sh(ws, "cat a.txt")).isEqualTo("one");
    ws.writeText("a.txt", "two, longer"); // gVisor must not serve a cached copy
    assertThat(sh(ws, "cat a.txt")).isEqualTo("two, longer");
    sh(ws, "printf three > a.txt");
    assertThat(ws.readText("a.txt")).isEqualTo("three");
    assertThat(
            Path.of("/var/lib/sandbox4j/sandboxes", ws.open().id(), "rootfs")
                .resolve(".gvisor.filestore." + ws.open().id()))
        .as("writes reach the sandbox's own disk, not a file store of gVisor's")
        .doesNotExist();
  }

  /**
   * /tmp is the root's own directory, bound in by the engine (runsc would mount a tmpfs of its own
   * there). A bind mount's source is resolved on the host, so an image whose /tmp is a symlink
   * (here a snapshot of a container sandbox whose root made it one) must never get it bound: the
   * link would name a host path. An image without /tmp gets one made.
   */
  @Test
  void tmpIsTheSandboxsOwnAndAnImagesTmpLinkNeverBecomesAHostPath() throws Exception {
    Workspace ws = create();
    ws.writeText("/tmp/api.txt", "api");
    assertThat(sh(ws, "cat /tmp/api.txt; echo; stat -c %a /tmp")).isEqualTo("api\n1777");

    Path secretDir = Files.createTempDirectory("sandbox4j-gvisor-tmp-");
    Files.writeString(secretDir.resolve("host-secret.txt"), "host secret");
    LocalSandbox containers = LocalSandbox.builder().label(LABEL, TAG).progress(l -> {}).build();
    List<String> snapshots = new ArrayList<>();
    try {
      for (String tmp : List.of(secretDir.toString(), "/", "")) {
        Workspace container = Workspace.of(containers.newBackend());
        try {
          sh(
              container,
              "sudo rm -rf /tmp" + (tmp.isEmpty() ? "" : " && sudo ln -s '" + tmp + "' /tmp"));
          String name = "gvisor-tmp-" + UUID.randomUUID().toString().substring(0, 8);
          containers.snapshot(container.open(), name);
          snapshots.add(name);
        } finally {
          containers.destroy(container.open());
        }
        LocalSandbox fromSnapshot =
            LocalSandbox.builder()
                .isolation(Isolation.GVISOR)
                .snapshot(snapshots.getLast())
                .label(LABEL, snapshots.getLast())
                .progress(l -> {})
                .build();
        Workspace made = Workspace.of(fromSnapshot.newBackend());
        if (!tmp.isEmpty()) {
          assertThatThrownBy(made::open)
              .as("/tmp -> '%s'", tmp)
              .isInstanceOf(WorkspaceException.class)
              .hasMessageContaining(
                  "a /tmp that is not a directory (here a symbolic link to " + tmp)
              .hasMessageContaining("not supported with gVisor isolation");
          assertThat(fromSnapshot.list())
              .as("nothing is left of the refused create")
              .noneMatch(i -> snapshots.getLast().equals(i.labels().get(LABEL)));
        } else {
          WorkspaceRef ref = made.open();
          created.add(ref);
          for (String state : List.of("create", "stop and start")) {
            if (state.startsWith("stop")) {
              sandboxes.stop(ref);
              sandboxes.start(ref);
            }
            made.writeText("/tmp/made.txt", state);
            assertThat(sh(made, "cat /tmp/made.txt; echo; stat -c '%a %U' /tmp"))
                .as(
                    "no /tmp in the image, after %s: one of its own, as the file API sees it",
                    state)
                .isEqualTo(state + "\n1777 root");
          }
        }
        try (var hostFiles = Files.list(secretDir)) {
          assertThat(hostFiles.map(f -> f.getFileName().toString()))
              .containsExactly("host-secret.txt");
        }
      }
    } finally {
      snapshots.forEach(containers::removeSnapshot);
      Files.delete(secretDir.resolve("host-secret.txt"));
      Files.delete(secretDir);
    }
  }

  @Test
  void theSentryIsTheReapersChildAndIsGoneTheMomentADestroyReturns() throws Exception {
    Prerequisites.require(
        dev.sandbox4j.runtime.internal.oci.HelperBuilds.REAPER.present(),
        "the gVisor reaper (sandbox4j setup)");
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    long sentry =
        dev.sandbox4j.runtime.internal.oci.OciRuntime.initPid(
                LocalSandbox.DEFAULT_HOME.resolve("sandboxes").resolve(ref.id()).resolve("bundle"))
            .orElseThrow();
    ProcessHandle parent = ProcessHandle.of(sentry).orElseThrow().parent().orElseThrow();
    assertThat(parent.info().command())
        .as("the Sentry's parent")
        .contains(dev.sandbox4j.runtime.internal.oci.HelperBuilds.REAPER.installed().toString());

    sandboxes.destroy(ref);
    created.remove(ref);
    // runsc delete waits until the Sentry's pid is gone: with the reaper as its parent it was
    // reaped at once, not left a zombie for the host's init; the reaper then had no child left
    assertThat(Path.of("/proc", Long.toString(sentry))).as("the Sentry, reaped").doesNotExist();
    long deadline = System.nanoTime() + 10_000_000_000L; // it reaps the gofer too, then ends
    while (parent.isAlive() && !isZombie(parent.pid()) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertThat(parent.isAlive() && !isZombie(parent.pid())).as("the reaper, ended").isFalse();
  }

  private static boolean isZombie(long pid) {
    try {
      String stat = java.nio.file.Files.readString(Path.of("/proc", pid + "", "stat"));
      return stat.substring(stat.lastIndexOf(')') + 2).startsWith("Z");
    } catch (java.io.IOException gone) {
      return true;
    }
  }
}
