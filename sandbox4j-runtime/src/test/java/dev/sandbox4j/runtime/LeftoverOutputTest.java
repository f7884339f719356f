package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Output that background children write after their command returned costs the engine nothing that
 * grows: after 24 commands each left a child that writes to the command's stdout and stderr
 * forever, the engine's threads are back where they were and it spends next to no CPU, while the
 * children go on writing (their output is drained inside the sandbox's cgroups).
 */
class LeftoverOutputTest {
  private static final int COMMANDS = 24;

  /**
   * The engine's CPU over the window may not reach this: a generous bound (a sixth of one CPU over
   * the window). Draining 48 pipes of {@code yes} in this JVM takes most of a CPU.
   */
  private static final Duration WINDOW = Duration.ofSeconds(3);

  private static final Duration MAX_CPU_IN_WINDOW = Duration.ofMillis(500);

  /** Platform threads the JDK may start or end meanwhile for itself (process reapers, JIT). */
  private static final int THREAD_SLACK = 12;

  private Workspace ws;

  @BeforeEach
  void create() {
    Prerequisites.requireLocalEngine();
    ws = Workspace.of(new LocalSandbox().newBackend());
    ws.open();
  }

  @AfterEach
  void destroy() {
    if (ws != null && ws.ref().isPresent()) {
      new LocalSandbox().destroy(ws.ref().get());
    }
  }

  @Test
  void backgroundWritersCostTheEngineNoThreadsAndNoCpuOnceTheirCommandsReturned() throws Exception {
    // warm up: the first command starts the pools a command needs
    run("rm -f /tmp/go; (sleep 1 &); echo warm");
    Thread.sleep(ProcessCommandsGrace.plusSeconds(1).toMillis());
    int baseline = threads();

    // at once: each returns only after the 2 s drain grace, since its children keep the pipes
    List<Future<CommandResult>> runs = new ArrayList<>();
    try (ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
      for (int i = 0; i < COMMANDS; i++) {
        String n = Integer.toString(i);
        // they write once every command has returned: within the drain grace, output counts
        runs.add(
            threads.submit(
                () ->
                    run(
                        "w() { while [ ! -e /tmp/go ]; do sleep 0.1; done; exec yes \"$@\"; };"
                            + " w out-"
                            + n
                            + " & w err-"
                            + n
                            + " >&2 & echo go")));
      }
      for (Future<CommandResult> r : runs) {
        assertThat(r.get().stdoutText())
            .as(
                "the command returns with its own output while its children go on writing: %s",
                r.get())
            .isEqualTo("go\n");
      }
    }
    run("touch /tmp/go");

    long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (threads() > baseline + THREAD_SLACK && System.nanoTime() < end) {
      Thread.sleep(100);
    }
    assertThat(threads())
        .as(
            "the engine's threads return to the baseline (%d) after %d commands whose children"
                + " write forever (today: two reader threads per command, for as long as the"
                + " child lives)",
            baseline, COMMANDS)
        .isLessThanOrEqualTo(baseline + THREAD_SLACK);

    long cpuBefore = cpuNanos();
    Thread.sleep(WINDOW.toMillis());
    long cpu = cpuNanos() - cpuBefore;
    assertThat(Duration.ofNanos(cpu))
        .as(
            "the engine's CPU over %s while %d background children write to returned commands'"
                + " output",
            WINDOW, 2 * COMMANDS)
        .isLessThan(MAX_CPU_IN_WINDOW);

    assertThat(Integer.parseInt(run("pgrep -c -x yes").stdoutText().strip()))
        .as("the children still run: their output lost no reader (no SIGPIPE)")
        .isGreaterThanOrEqualTo(2 * COMMANDS);
  }

  private static final Duration ProcessCommandsGrace =
      dev.sandbox4j.workspace.spi.ProcessCommands.DRAIN_GRACE;

  private CommandResult run(String script) {
    return ws.run(Command.shell(script), RunOptions.withTimeout(Duration.ofSeconds(60)));
  }

  /**
   * This JVM's live threads, less the JDK's idle process reapers: a pool thread named exactly
   * "process reaper" waits for its next process and ends after 60 s idle (a reaper that waits for a
   * process is named "process reaper (pid N)" and counts). Waiting for the idle ones to end would
   * only wait on the JDK's keep-alive, not check the engine.
   */
  private static int threads() {
    int idleReapers = 0;
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (t.getName().equals("process reaper")) {
        idleReapers++;
      }
    }
    return ManagementFactory.getThreadMXBean().getThreadCount() - idleReapers;
  }

  /** This JVM's user + system CPU time, from {@code /proc/self/stat} (clock ticks of 10 ms). */
  private static long cpuNanos() throws IOException {
    String stat = Files.readString(Path.of("/proc/self/stat"));
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    long ticks = Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // utime, stime
    return ticks * 10_000_000L;
  }
}
