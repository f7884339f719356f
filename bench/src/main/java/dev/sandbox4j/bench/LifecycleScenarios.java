package dev.sandbox4j.bench;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.util.List;
import java.util.function.Function;

/**
 * The local engine's lifecycle scenarios (issue 5): suspend + resume, a fork and a snapshot of a
 * sandbox with 200 MB written, a live fork of a sandbox running a small process tree, and create
 * from a snapshot. Sandboxes are made by {@code sandboxes} (labelled with the run, so the target's
 * cleanup destroys them and their forks); snapshots are named {@code bench-<pid>-*} and removed
 * after each round and at close.
 */
final class LifecycleScenarios implements Target.ExtraScenarios {
  private static final Command TRUE = Command.argv("true");
  private static final Command WRITE_200MB =
      Command.shell("head -c 200M /dev/urandom > big.bin && sync big.bin");

  /** A small process tree, detached (so a live fork carries it): a counter and an HTTP server. */
  private static final Command SMALL_TREE =
      Command.shell(
          "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.1; done'"
              + " >/dev/null 2>&1 </dev/null &"
              + " nohup python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp"
              + " >/dev/null 2>&1 </dev/null &"
              + " for n in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8000/ && exit 0;"
              + " sleep 0.1; done; exit 1");

  private final LocalSandbox sandboxes;
  private final Function<String, LocalSandbox> fromSnapshot;
  private final Command firstCommand;
  private final String prefix = "bench-" + ProcessHandle.current().pid();
  private Workspace small;
  private Workspace big;
  private Workspace live;
  private String smallSnapshot;
  private PortBench ports;
  private int counter;

  /**
   * @param sandboxes makes the sandboxes measured on
   * @param fromSnapshot the engine making new sandboxes from the snapshot named
   * @param firstCommand what create_from_snapshot runs first, as create_first_command does
   */
  LifecycleScenarios(
      LocalSandbox sandboxes, Function<String, LocalSandbox> fromSnapshot, Command firstCommand) {
    this.sandboxes = sandboxes;
    this.fromSnapshot = fromSnapshot;
    this.firstCommand = firstCommand;
  }

  @Override
  public List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup) {
    int heavy = Math.max(20, iterations / 5);
    int heavier = Math.max(10, iterations / 20);
    return List.of(
        new WorkspaceBench.Scenario("suspend_resume", warmup, iterations, this::suspendResume),
        new WorkspaceBench.Scenario(
            "fork_files_200mb", Math.min(warmup, 3), heavy, this::fork200Mb),
        new WorkspaceBench.Scenario("fork_live", Math.min(warmup, 3), heavy, this::forkLive),
        new WorkspaceBench.Scenario(
            "snapshot_200mb", Math.min(warmup, 2), heavier, this::snapshot200Mb),
        new WorkspaceBench.Scenario(
            "create_from_snapshot", warmup, iterations, this::createFromSnapshot),
        new WorkspaceBench.Scenario(
            "port_url_1kib", warmup, iterations * 5, () -> ports().viaProxy()),
        new WorkspaceBench.Scenario(
            "port_direct_1kib", warmup, iterations * 5, () -> ports().direct()),
        new WorkspaceBench.Scenario(
            "port_url_1kib_new_connection",
            warmup,
            iterations * 5,
            () -> ports().viaProxyNewConnection()));
  }

  /** The port URL scenarios' sandbox and connections, made on first use. */
  private PortBench ports() throws Exception {
    if (ports == null) {
      ports = new PortBench(sandboxes);
    }
    return ports;
  }

  private Workspace small() {
    if (small == null) {
      small = Workspace.of(sandboxes.newBackend());
      check(small.run(TRUE));
    }
    return small;
  }

  private Workspace big() {
    if (big == null) {
      big = Workspace.of(sandboxes.newBackend());
      check(big.run(WRITE_200MB));
    }
    return big;
  }

  /** suspend then resume of a sandbox that has run a command. */
  long[] suspendResume() {
    WorkspaceRef ref = small().open();
    long start = System.nanoTime();
    sandboxes.suspend(ref);
    sandboxes.resume(ref);
    return new long[] {System.nanoTime() - start};
  }

  /**
   * files-only fork ({@code forkFiles}) of a running sandbox with 200 MB written; the fork's
   * destroy is not timed. {@code fork_live} measures a fork that copies processes.
   */
  long[] fork200Mb() {
    WorkspaceRef ref = big().open();
    long start = System.nanoTime();
    ForkResult fork = sandboxes.forkFiles(ref);
    long elapsed = System.nanoTime() - start;
    sandboxes.destroy(fork.ref());
    return new long[] {elapsed};
  }

  /**
   * fork of a running sandbox with a small process tree (sh counter loop + python http.server),
   * until the fork runs them; fails if the processes were not copied. The destroy is not timed.
   */
  long[] forkLive() {
    if (live == null) {
      live = Workspace.of(sandboxes.newBackend());
      check(live.run(SMALL_TREE));
    }
    WorkspaceRef ref = live.open();
    long start = System.nanoTime();
    ForkResult fork = sandboxes.fork(ref);
    long elapsed = System.nanoTime() - start;
    sandboxes.destroy(fork.ref());
    if (!fork.processesCopied()) {
      throw new IllegalStateException("fork_live: processes were not copied: " + fork.reason());
    }
    return new long[] {elapsed};
  }

  /** snapshot of a running sandbox with 200 MB written; removing it is not timed. */
  long[] snapshot200Mb() {
    WorkspaceRef ref = big().open();
    String name = prefix + "-" + counter++;
    long start = System.nanoTime();
    sandboxes.snapshot(ref, name);
    long elapsed = System.nanoTime() - start;
    sandboxes.removeSnapshot(name);
    return new long[] {elapsed};
  }

  /**
   * New backend of a sandbox from a snapshot (of a sandbox that ran one command), then its first
   * command, as create_first_command times it; the destroy is not timed.
   */
  long[] createFromSnapshot() {
    if (smallSnapshot == null) {
      smallSnapshot = prefix + "-small";
      sandboxes.snapshot(small().open(), smallSnapshot);
    }
    LocalSandbox engine = fromSnapshot.apply(smallSnapshot);
    long start = System.nanoTime();
    Workspace ws = Workspace.of(engine.newBackend());
    try {
      CommandResult r = ws.run(firstCommand);
      long elapsed = System.nanoTime() - start;
      check(r);
      return new long[] {elapsed};
    } finally {
      ws.ref().ifPresent(sandboxes::destroy);
    }
  }

  private static void check(CommandResult r) {
    if (!r.succeeded()) {
      throw new IllegalStateException("a setup command failed: " + r);
    }
  }

  @Override
  public void close() throws Exception {
    if (ports != null) {
      ports.close();
    }
    for (Workspace ws : new Workspace[] {small, big, live}) {
      if (ws != null) {
        ws.ref().ifPresent(sandboxes::destroy);
      }
    }
    if (smallSnapshot != null) {
      sandboxes.removeSnapshot(smallSnapshot);
    }
  }
}
