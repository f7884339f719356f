package dev.sandbox4j.runtime;

import static dev.sandbox4j.runtime.SandboxProcesses.awaitAbove;
import static dev.sandbox4j.runtime.SandboxProcesses.awaitProcess;
import static dev.sandbox4j.runtime.SandboxProcesses.check;
import static dev.sandbox4j.runtime.SandboxProcesses.counter;
import static dev.sandbox4j.runtime.SandboxProcesses.killAndAwaitGone;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 5, live part, through the public API only: {@link LocalSandbox#fork} copies the running
 * processes (an HTTP server and a counter go on in both, independently), and {@link
 * LocalSandbox#hibernate} saves a process's memory to disk and an exec restores it. Needs
 * checkpoint/restore ({@code sandbox4j setup}); under {@code CI=true} its absence is a failure.
 */
class LiveForkTest {
  private static final String LABEL = "sandbox4j.test";
  private static final String TAG = "livefork-" + UUID.randomUUID().toString().substring(0, 8);

  /**
   * Counts to /tmp/c every 0.1 s (renamed into place: a kill never leaves it empty); serves /tmp on
   * 127.0.0.1:8000; both detached (nohup).
   */
  private static final String WORKLOAD =
      "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c;"
          + " sleep 0.1; done'"
          + " >/dev/null 2>&1 </dev/null &"
          + " nohup python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp"
          + " >/tmp/http.log 2>&1 </dev/null &"
          + " for n in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8000/ && exit 0;"
          + " sleep 0.1; done; exit 1";

  /** Keeps a count in memory only, writing it (atomically) to /tmp/m every 0.1 s. */
  private static final String MEMORY_COUNTER =
      "import os, time\n"
          + "i = 0\n"
          + "while True:\n"
          + "    i += 1\n"
          + "    with open('/tmp/m.new', 'w') as f:\n"
          + "        f.write(str(i))\n"
          + "    os.replace('/tmp/m.new', '/tmp/m')\n"
          + "    time.sleep(0.1)\n";

  private static LocalSandbox sandboxes;
  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void setUp() {
    Prerequisites.requireLocalEngine();
    sandboxes = LocalSandbox.builder().label(LABEL, TAG).progress(line -> {}).build();
    var why = Checkpoints.unavailable(sandboxes.engine().runtime());
    Prerequisites.require(why.isEmpty(), "checkpoint/restore: " + why.orElse(""));
  }

  @AfterEach
  void destroy() {
    for (WorkspaceRef ref : own) {
      sandboxes.destroy(ref);
    }
    own.clear();
  }

  @Test
  void forkCopiesTheRunningServerAndCounterWhichThenRunIndependently() throws Exception {
    Workspace parent = create();
    WorkspaceRef parentRef = parent.open();
    check(parent, WORKLOAD);
    check(parent, "echo parent > /tmp/who");
    BackgroundCommand attached =
        parent.start(Command.shell("exec sleep 600"), RunOptions.defaults());
    awaitProcess(parent, "sleep [6]00");
    long before = awaitAbove(parent, 5);

    long start = System.nanoTime();
    ForkResult fork = sandboxes.fork(parentRef);
    long took = (System.nanoTime() - start) / 1_000_000;
    own.add(fork.ref());
    System.out.printf(Locale.ROOT, "live fork through the API: %d ms%n", took);

    assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
    assertThat(fork.reason()).isEmpty();
    assertThat(fork.notCarried())
        .as("the attached command is reported")
        .anySatisfy(p -> assertThat(p).contains("sleep 600"));
    assertThat(attached.isRunning()).as("the parent's attached command goes on").isTrue();
    assertThat(state(parentRef)).isEqualTo("running");
    assertThat(state(fork.ref())).isEqualTo("running");

    Workspace child = Workspace.of(sandboxes.backend(fork.ref()).orElseThrow());
    assertThat(check(child, "pgrep -f 'sleep [6]00' || true")).isEmpty();
    long childStart = counter(child);
    assertThat(childStart)
        .as("the fork's counter goes on from the parent's, not from 0")
        .isGreaterThanOrEqualTo(before);
    assertThat(awaitAbove(child, childStart)).isGreaterThan(childStart);
    assertThat(awaitAbove(parent, counter(parent))).isPositive();

    // Independent: the fork's counter ends, the parent's goes on.
    killAndAwaitGone(child, "while [:]");
    long stopped = counter(child);
    long p1 = counter(parent);
    Thread.sleep(500);
    assertThat(counter(child)).as("the fork's counter stopped").isEqualTo(stopped);
    assertThat(awaitAbove(parent, p1)).as("the parent's goes on").isGreaterThan(p1);

    // The server runs in the fork and serves the fork's files.
    check(child, "echo fork > /tmp/who");
    assertThat(check(child, "curl -sf http://127.0.0.1:8000/who")).isEqualTo("fork");
    assertThat(check(parent, "curl -sf http://127.0.0.1:8000/who")).isEqualTo("parent");
    check(parent, "pkill -f 'http[.]server'");
    assertThat(check(child, "curl -sf http://127.0.0.1:8000/who"))
        .as("the fork's server outlives the parent's")
        .isEqualTo("fork");

    // Files change independently both ways.
    child.writeText("only-in-fork.txt", "f");
    parent.writeText("only-in-parent.txt", "p");
    assertThat(parent.exists("only-in-fork.txt")).isFalse();
    assertThat(child.exists("only-in-parent.txt")).isFalse();
    assertThat(check(child, "hostname")).isEqualTo(fork.ref().id());
    attached.kill();
  }

  @Test
  void hibernateFreesTheProcessesAndAnExecRestoresTheirMemory() throws Exception {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    ws.writeText("/tmp/mem.py", MEMORY_COUNTER);
    check(ws, "nohup python3 /tmp/mem.py >/dev/null 2>&1 </dev/null &");
    awaitMemoryAbove(ws, 15);
    String pid = check(ws, "pgrep -f 'mem[.]py'");

    sandboxes.hibernate(ref);
    assertThat(state(ref)).isEqualTo("hibernated");
    sandboxes.hibernate(ref); // idempotent
    Engine engine = sandboxes.engine();
    assertThat(engine.runtime().status(ref.id())).as("the container is gone").isEmpty();
    assertThat(engine.cgroups().pids(ref.id())).as("no process is left").isEmpty();
    Path saved =
        SandboxDisk.upper(sandboxes.home().resolve("sandboxes").resolve(ref.id())).resolve("tmp/m");
    long atHibernate = Long.parseLong(Files.readString(saved).strip());
    Thread.sleep(1000);
    assertThat(Long.parseLong(Files.readString(saved).strip()))
        .as("stopped while hibernated: its counter file did not move in 1 s (10 of its periods)")
        .isEqualTo(atHibernate);

    // An exec wakes it: the same process, counting on from its memory, not from 0.
    long start = System.nanoTime();
    long resumed = Long.parseLong(check(ws, "cat /tmp/m"));
    System.out.printf(
        Locale.ROOT,
        "wake from hibernate (restore + exec): %d ms%n",
        (System.nanoTime() - start) / 1_000_000);
    assertThat(state(ref)).isEqualTo("running");
    assertThat(resumed).as("from its memory, not from 0").isGreaterThanOrEqualTo(atHibernate);
    assertThat(check(ws, "pgrep -f 'mem[.]py'")).as("the same process").isEqualTo(pid);
    assertThat(awaitMemoryAbove(ws, resumed + 3)).isGreaterThan(resumed + 3);

    // A fork of a hibernated sandbox gets its processes; the parent stays hibernated.
    sandboxes.hibernate(ref);
    ForkResult fork = sandboxes.fork(ref);
    own.add(fork.ref());
    assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
    assertThat(state(ref)).isEqualTo("hibernated");
    Workspace child = Workspace.of(sandboxes.backend(fork.ref()).orElseThrow());
    long inChild = Long.parseLong(check(child, "cat /tmp/m"));
    assertThat(awaitMemoryAbove(child, inChild)).isGreaterThan(inChild);

    // Files wake it too, and a hibernated sandbox can be destroyed.
    assertThat(ws.readText("/tmp/mem.py")).isEqualTo(MEMORY_COUNTER);
    assertThat(state(ref)).isEqualTo("running");
    sandboxes.hibernate(ref);
    sandboxes.destroy(ref);
    own.remove(ref);
    assertThat(sandboxes.list()).noneMatch(i -> i.ref().equals(ref));
    assertThat(engine.runtime().status(ref.id())).isEmpty();
    assertThatThrownBy(() -> sandboxes.hibernate(ref))
        .isInstanceOf(WorkspaceUnavailableException.class);
  }

  @Test
  void stoppedSandboxesForkWithFilesOnlyAndStayStoppedWhenHibernated() {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    ws.writeText("f.txt", "one");
    sandboxes.stop(ref);
    sandboxes.hibernate(ref);
    assertThat(state(ref)).isEqualTo("stopped");
    ForkResult fork = sandboxes.fork(ref);
    own.add(fork.ref());
    assertThat(fork.processesCopied()).isFalse();
    assertThat(fork.reason()).contains("stopped").contains("no running processes");
    assertThat(fork.notCarried()).isEmpty();
    assertThat(Workspace.of(sandboxes.backend(fork.ref()).orElseThrow()).readText("f.txt"))
        .isEqualTo("one");
  }

  /** A hibernate interrupted before its checkpoint was complete: gc stops it, files kept. */
  @Test
  void gcStopsAnInterruptedHibernateWithoutACompleteCheckpoint() throws Exception {
    Workspace ws = create();
    WorkspaceRef ref = ws.open();
    ws.writeText("kept.txt", "k");
    sandboxes.stop(ref);
    Path dir = sandboxes.home().resolve("sandboxes").resolve(ref.id());
    Path state = dir.resolve("state.json");
    SandboxRecord.read(state).withStatus(SandboxRecord.Status.HIBERNATED).write(state);
    Files.createDirectories(dir.resolve(Lifecycle.CHECKPOINT_PARTIAL));
    sandboxes.gc();
    assertThat(state(ref)).isEqualTo("stopped");
    assertThat(dir.resolve(Lifecycle.CHECKPOINT_PARTIAL)).doesNotExist();
    assertThat(ws.readText("kept.txt")).isEqualTo("k");
  }

  // ---- helpers ----------------------------------------------------------------------------

  private Workspace create() {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    own.add(ws.open());
    return ws;
  }

  private static String state(WorkspaceRef ref) {
    return sandboxes.list().stream()
        .filter(i -> i.ref().equals(ref))
        .findFirst()
        .orElseThrow()
        .state();
  }

  private static long awaitMemoryAbove(Workspace ws, long value) throws InterruptedException {
    long end = System.nanoTime() + SandboxProcesses.PATIENCE.toNanos();
    long now = -1;
    while (System.nanoTime() < end) {
      String text = check(ws, "cat /tmp/m 2>/dev/null || echo -1");
      now = Long.parseLong(text);
      if (now > value) {
        break;
      }
      Thread.sleep(100);
    }
    return now;
  }
}
