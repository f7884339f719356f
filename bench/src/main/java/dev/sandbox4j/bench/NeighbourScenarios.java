package dev.sandbox4j.bench;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import java.time.Duration;
import java.util.List;

/**
 * A noisy neighbour (issue 13): the latency of {@code true} in sandbox B while sandbox A is idle,
 * runs a fork bomb, or runs a memory bomb. Both sandboxes have the defaults (1 CPU; the pids
 * derived from the host; A's memory 512 MiB so that its bomb meets the OOM killer often). The goal:
 * a bomb in A leaves B's exec within 2x of idle.
 */
final class NeighbourScenarios implements Target.ExtraScenarios {
  private static final Command TRUE = Command.argv("true");

  /** Forks until the pids limit, and keeps every process spinning on fork. */
  private static final Command FORK_BOMB =
      Command.shell("bash -c ':(){ :|:& };:' 2>/dev/null; exec sleep 3600");

  /** Allocates (and touches) 1 GiB over and over: the OOM killer ends each try inside A. */
  private static final Command MEMORY_BOMB =
      Command.shell(
          "while :; do python3 -c 'b = bytearray(b\"\\x01\") * (1 << 30)' 2>/dev/null; done");

  private final LocalSandbox.Builder sandboxes;
  private Workspace a;
  private Workspace b;
  private BackgroundCommand bomb;
  private String running = "idle";

  /** {@code sandboxes}: a builder with the run's label, so the target's cleanup destroys them. */
  NeighbourScenarios(LocalSandbox.Builder sandboxes) {
    this.sandboxes = sandboxes;
  }

  @Override
  public List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup) {
    return List.of(
        new WorkspaceBench.Scenario(
            "exec_true_neighbour_idle", warmup, iterations, () -> execInB("idle")),
        new WorkspaceBench.Scenario(
            "exec_true_neighbour_fork_bomb", warmup, iterations, () -> execInB("fork_bomb")),
        new WorkspaceBench.Scenario(
            "exec_true_neighbour_memory_bomb", warmup, iterations, () -> execInB("memory_bomb")));
  }

  private long[] execInB(String neighbour) throws Exception {
    if (a == null) {
      a = Workspace.of(sandboxes.memory(512L << 20).build().newBackend());
      b = Workspace.of(sandboxes.memory(4L << 30).build().newBackend());
      check(a.run(TRUE));
      check(b.run(TRUE));
    }
    if (!running.equals(neighbour)) {
      stopBomb();
      if (!neighbour.equals("idle")) {
        bomb =
            a.start(neighbour.equals("fork_bomb") ? FORK_BOMB : MEMORY_BOMB, RunOptions.defaults());
        Thread.sleep(Duration.ofSeconds(3)); // let it reach its limit
      }
      running = neighbour;
    }
    long start = System.nanoTime();
    check(b.run(TRUE));
    return new long[] {System.nanoTime() - start};
  }

  private void stopBomb() throws InterruptedException {
    if (bomb != null) {
      bomb.kill();
      bomb = null;
    }
  }

  private static void check(CommandResult r) {
    if (r.exitCode() != 0) {
      throw new IllegalStateException("exit " + r.exitCode() + ": " + r.stderrText());
    }
  }

  @Override
  public void close() throws InterruptedException {
    stopBomb(); // the sandboxes carry the run's label: the target destroys them
  }
}
