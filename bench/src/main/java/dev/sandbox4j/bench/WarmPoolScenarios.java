package dev.sandbox4j.bench;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import java.time.Duration;
import java.util.List;

/**
 * Create with a warm pool (issue 18: ready in 10 ms): a new backend, then its first command, from a
 * provider with {@code warmPool(SIZE)}. Before each round the pool is full again (untimed): the
 * figure is what a caller sees when sandboxes are asked for no faster than the pool refills. With
 * {@code node -v} (as {@code create_first_command}) and with {@code true}, the floor.
 */
final class WarmPoolScenarios implements Target.ExtraScenarios {
  static final int SIZE = 2;
  private static final Duration FILL = Duration.ofMinutes(2);

  private final LocalSandbox.Builder sandboxes;
  private final Command firstCommand;
  private LocalSandbox pool; // made by the first round: no pool fills unless these scenarios run

  /** {@code sandboxes}: a builder with the run's label, so the target's cleanup destroys them. */
  WarmPoolScenarios(LocalSandbox.Builder sandboxes, Command firstCommand) {
    this.sandboxes = sandboxes;
    this.firstCommand = firstCommand;
  }

  @Override
  public List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup) {
    return List.of(
        new WorkspaceBench.Scenario(
            "warm_create_first_command", warmup, iterations, () -> claim(firstCommand)),
        new WorkspaceBench.Scenario(
            "warm_create_true", warmup, iterations, () -> claim(Command.argv("true"))));
  }

  private long[] claim(Command first) throws InterruptedException {
    if (pool == null) {
      pool = sandboxes.warmPool(SIZE).build();
    }
    awaitFull();
    long start = System.nanoTime();
    Workspace ws = Workspace.of(pool.newBackend());
    try {
      CommandResult r = ws.run(first);
      long elapsed = System.nanoTime() - start;
      if (!r.succeeded()) {
        throw new IllegalStateException(first + " exited " + r.exitCode() + ": " + r.stderrText());
      }
      return new long[] {elapsed};
    } finally {
      ws.ref().ifPresent(pool::destroy);
    }
  }

  private void awaitFull() throws InterruptedException {
    long end = System.nanoTime() + FILL.toNanos();
    while (pool.warmSandboxes() < SIZE) {
      if (System.nanoTime() > end) {
        throw new IllegalStateException(
            "the warm pool held " + pool.warmSandboxes() + " of " + SIZE + " after " + FILL);
      }
      Thread.sleep(5);
    }
  }

  @Override
  public void close() {
    if (pool != null) {
      pool.close();
    }
  }
}
