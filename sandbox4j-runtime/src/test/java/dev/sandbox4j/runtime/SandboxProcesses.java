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

  /** Waits up to 5 s for the counter to pass {@code value}; returns it. */
  static long awaitAbove(Workspace ws, long value) throws InterruptedException {
    long end = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    long now = counter(ws);
    while (now <= value && System.nanoTime() < end) {
      Thread.sleep(100);
      now = counter(ws);
    }
    return now;
  }

  /** Waits up to 5 s for a process whose command line matches {@code pattern}. */
  static void awaitProcess(Workspace ws, String pattern) throws InterruptedException {
    for (int i = 0; i < 100; i++) {
      if (!check(ws, "pgrep -f '" + pattern + "' || true").isEmpty()) {
        return;
      }
      Thread.sleep(50);
    }
  }
}
