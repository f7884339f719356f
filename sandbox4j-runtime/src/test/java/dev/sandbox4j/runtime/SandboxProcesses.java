package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import java.time.Duration;

/** Running scripts in a sandbox and watching the counter that fork and hibernate tests start. */
final class SandboxProcesses {
  private SandboxProcesses() {}

  /** Runs {@code script}, requires exit 0, and returns its stripped stdout. */
  static String check(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(Duration.ofSeconds(60)));
    assertThat(r.exitCode()).as(script + ": " + r.stderrText()).isZero();
    return r.stdoutText().strip();
  }

  /** The counter the tests' workload writes to {@code /tmp/c}. */
  static long counter(Workspace ws) {
    return Long.parseLong(check(ws, "cat /tmp/c"));
  }

  /**
   * How long a wait for something that takes milliseconds may last before it counts as a hang: a
   * generous bound for a loaded machine, never a speed goal (a wait returns once its event comes).
   */
  static final Duration PATIENCE = Duration.ofSeconds(60);

  /** Waits (up to {@link #PATIENCE}) for the counter to pass {@code value}; returns it. */
  static long awaitAbove(Workspace ws, long value) throws InterruptedException {
    long end = System.nanoTime() + PATIENCE.toNanos();
    long now = counter(ws);
    while (now <= value && System.nanoTime() < end) {
      Thread.sleep(100);
      now = counter(ws);
    }
    return now;
  }

  /** Waits for a process whose command line matches {@code pattern}; fails after PATIENCE. */
  static void awaitProcess(Workspace ws, String pattern) throws InterruptedException {
    long end = System.nanoTime() + PATIENCE.toNanos();
    while (check(ws, "pgrep -f '" + pattern + "' || true").isEmpty()) {
      assertThat(System.nanoTime() < end)
          .as("a process matching '" + pattern + "' within " + PATIENCE)
          .isTrue();
      Thread.sleep(50);
    }
  }

  /**
   * Kills the processes matching {@code pattern} and waits until none is left (fails after
   * PATIENCE): after that, nothing of theirs can change anything.
   */
  static void killAndAwaitGone(Workspace ws, String pattern) {
    check(
        ws,
        "pkill -f '"
            + pattern
            + "'; end=$(( $(date +%s) + "
            + PATIENCE.toSeconds()
            + " )); while pgrep -f '"
            + pattern
            + "' >/dev/null; do [ $(date +%s) -lt $end ] || exit 1; sleep 0.05; done");
  }
}
