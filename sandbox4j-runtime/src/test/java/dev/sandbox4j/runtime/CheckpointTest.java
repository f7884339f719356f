package dev.sandbox4j.runtime;

import static dev.sandbox4j.runtime.SandboxProcesses.awaitAbove;
import static dev.sandbox4j.runtime.SandboxProcesses.awaitProcess;
import static dev.sandbox4j.runtime.SandboxProcesses.check;
import static dev.sandbox4j.runtime.SandboxProcesses.counter;
import static dev.sandbox4j.runtime.SandboxProcesses.killAndAwaitGone;
import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.linux.Mounts;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Live fork and hibernate of real sandboxes' processes with CRIU ({@link Checkpoints}): a counter
 * loop and a Python HTTP server on loopback, started detached (nohup, so that they are descendants
 * of the sandbox's init), go on in a fork and after a restore.
 */
class CheckpointTest {

  private static final LocalSandbox SANDBOXES =
      LocalSandbox.builder().label("test", "checkpoint").build();

  /**
   * Counts to /tmp/c every 0.1 s (renamed into place: a kill never leaves it empty); serves /tmp on
   * 127.0.0.1:8000.
   */
  private static final String WORKLOAD =
      "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c;"
          + " sleep 0.1; done'"
          + " >/dev/null 2>&1 </dev/null &"
          + " nohup python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp"
          + " >/tmp/http.log 2>&1 </dev/null &"
          + " for n in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8000/ && exit 0;"
          + " sleep 0.1; done; exit 1";

  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @TempDir Path tmp;

  @BeforeAll
  static void requireCheckpointRestore() {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(
        Checkpoints.unavailable(SANDBOXES.engine().runtime()).isEmpty(),
        "checkpoint/restore: "
            + Checkpoints.unavailable(SANDBOXES.engine().runtime()).orElse("")
            + " (sandbox4j setup)");
  }

  @AfterEach
  void destroy() {
    for (WorkspaceRef ref : own) {
      SANDBOXES.destroy(ref);
    }
    own.clear();
  }

  @Test
  void aForkKeepsTheProcessesRunningIndependentlyWithItsOwnFilesNameAndNetwork() throws Exception {
    Workspace parent = create();
    String parentId = parent.open().id();
    check(parent, WORKLOAD);
    // a command still attached to this JVM: its parent is the host's crun exec, so CRIU cannot
    // carry it
    BackgroundCommand attached =
        parent.start(Command.shell("exec sleep 600"), RunOptions.defaults());
    awaitProcess(parent, "sleep [6]00");
    long loopPid = Long.parseLong(check(parent, "pgrep -f 'while [:]' | head -n 1"));
    long before = counter(parent);

    Workspace child = create();
    String childId = child.open().id();
    boolean fastCgroupMoves = Mounts.favorDynmodsSet();
    Checkpoints.Fork fork =
        Checkpoints.fork(SANDBOXES.engine(), parentId, childId, tmp.resolve("images"));
    // CRIU's own cgroup2 mount clears the option; every later create and command would pay for it
    assertThat(Mounts.favorDynmodsSet())
        .as("favordynmods on the cgroup2 hierarchy after a checkpoint and restore")
        .isEqualTo(fastCgroupMoves);
    System.out.printf(
        Locale.ROOT,
        "fork: dump %d ms (%d KiB), parent frozen %d ms, restore %d ms, total %d ms%n",
        fork.dump().took().toMillis(),
        fork.dump().bytes() / 1024,
        fork.frozen().toMillis(),
        fork.restore().toMillis(),
        fork.total().toMillis());

    assertThat(fork.dump().notCarried())
        .as("the attached command is reported as not carried")
        .anySatisfy(p -> assertThat(p).contains("sleep 600"));
    assertThat(check(child, "pgrep -f 'sleep [6]00' || true"))
        .as("the attached command is not in the fork")
        .isEmpty();
    assertThat(attached.isRunning()).as("the parent's attached command goes on").isTrue();

    assertThat(Long.parseLong(check(child, "pgrep -f 'while [:]' | head -n 1")))
        .as("the counter is the same process (same pid in its pid namespace)")
        .isEqualTo(loopPid);
    long childStart = counter(child);
    assertThat(childStart).as("the fork's counter goes on from the parent's").isGreaterThan(before);
    assertThat(awaitAbove(child, childStart)).isGreaterThan(childStart);
    assertThat(awaitAbove(parent, counter(parent))).as("the parent keeps counting").isPositive();

    killAndAwaitGone(child, "while [:]");
    long stopped = counter(child);
    Thread.sleep(500);
    assertThat(counter(child)).as("the fork's counter stopped").isEqualTo(stopped);
    long p1 = counter(parent);
    assertThat(awaitAbove(parent, p1))
        .as("killing the fork's counter leaves the parent's counting")
        .isGreaterThan(p1);

    assertThat(check(child, "curl -sf http://127.0.0.1:8000/c"))
        .as("the server answers inside the fork, from the fork's files")
        .isEqualTo(Long.toString(counter(child)));
    assertThat(check(child, "hostname")).as("the fork's hostname is its id").isEqualTo(childId);
    assertThat(check(child, "cat /etc/hostname")).isEqualTo(childId);
    assertThat(check(child, "ip -o link show lo")).as("loopback is up").contains("UP");
    assertThat(check(parent, "hostname")).isEqualTo(parentId);

    check(child, "echo fork > /tmp/only-in-fork");
    check(parent, "echo parent > /tmp/only-in-parent");
    assertThat(check(parent, "ls /tmp")).doesNotContain("only-in-fork");
    assertThat(check(child, "ls /tmp")).doesNotContain("only-in-parent");
    attached.kill();
  }

  @Test
  void hibernateStopsTheProcessesAndRestoreResumesThemWhereTheyWere() throws Exception {
    Workspace ws = create();
    String id = ws.open().id();
    check(ws, WORKLOAD);
    long loopPid = Long.parseLong(check(ws, "pgrep -f 'while [:]' | head -n 1"));
    awaitAbove(ws, 20);
    Engine engine = SANDBOXES.engine();

    Checkpoints.Dump dump = Checkpoints.dumpAndStop(engine, id, tmp.resolve("images"));
    System.out.printf(
        Locale.ROOT,
        "hibernate: dump %d ms, %d KiB%n",
        dump.took().toMillis(),
        dump.bytes() / 1024);
    assertThat(engine.runtime().status(id)).as("the container is gone").isEmpty();
    assertThat(engine.cgroups().pids(id)).as("no process is left").isEmpty();
    Path counterFile = engine.dir(id).resolve("rootfs/tmp/c");
    long saved = Long.parseLong(Files.readString(counterFile).strip());
    Thread.sleep(1000);
    assertThat(Long.parseLong(Files.readString(counterFile).strip()))
        .as("stopped while hibernated: its counter file did not move in 1 s (10 of its periods)")
        .isEqualTo(saved);

    long start = System.nanoTime();
    Checkpoints.restore(engine, id, tmp.resolve("images"));
    System.out.printf(
        Locale.ROOT, "resume: restore %d ms%n", (System.nanoTime() - start) / 1_000_000);
    assertThat(engine.runtime().status(id)).contains("running");
    assertThat(Long.parseLong(check(ws, "pgrep -f 'while [:]' | head -n 1")))
        .as("the same process")
        .isEqualTo(loopPid);
    long resumed = counter(ws);
    assertThat(resumed)
        .as("it resumed from where it was, not from 0")
        .isGreaterThanOrEqualTo(saved);
    assertThat(awaitAbove(ws, resumed)).isGreaterThan(resumed);
    assertThat(check(ws, "curl -sf -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/"))
        .isEqualTo("200");
    assertThat(check(ws, "hostname")).isEqualTo(id);
  }

  /**
   * Timings of live forks of the small tree (sh loop + python http.server): {@code
   * -Dcheckpoint.runs=N} forks, p50 printed.
   */
  @Test
  void forkTimings() throws Exception {
    int runs = Integer.getInteger("checkpoint.runs", 2);
    Workspace parent = create();
    String parentId = parent.open().id();
    check(parent, WORKLOAD);
    List<Checkpoints.Fork> forks = new ArrayList<>();
    for (int i = 0; i < runs; i++) {
      Workspace child = create();
      forks.add(
          Checkpoints.fork(
              SANDBOXES.engine(), parentId, child.open().id(), tmp.resolve("images-" + i)));
      assertThat(awaitAbove(child, counter(child))).isPositive();
      SANDBOXES.destroy(child.ref().orElseThrow());
      own.remove(child.ref().orElseThrow());
    }
    System.out.printf(
        Locale.ROOT,
        "forks of a small tree, %d runs, load %s: dump p50 %d ms, frozen p50 %d ms, restore p50"
            + " %d ms, total p50 %d ms (min %d, max %d)%n",
        runs,
        Files.readString(Path.of("/proc/loadavg")).strip(),
        p50(forks.stream().map(f -> f.dump().took()).toList()),
        p50(forks.stream().map(Checkpoints.Fork::frozen).toList()),
        p50(forks.stream().map(Checkpoints.Fork::restore).toList()),
        p50(forks.stream().map(Checkpoints.Fork::total).toList()),
        forks.stream().mapToLong(f -> f.total().toMillis()).min().orElse(0),
        forks.stream().mapToLong(f -> f.total().toMillis()).max().orElse(0));
  }

  // ---- helpers ----------------------------------------------------------------------------

  private Workspace create() {
    Workspace ws = Workspace.of(SANDBOXES.newBackend());
    own.add(ws.open());
    return ws;
  }

  private static long p50(List<Duration> durations) {
    List<Long> ms = durations.stream().map(Duration::toMillis).sorted().toList();
    return ms.get(ms.size() / 2);
  }
}
