package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A command cancelled while it is still starting (crun exec not yet done) is killed too: it must
 * not start afterwards and run on. A server cancels that early when a client's stdin source fails
 * at once.
 */
class CancelAtStartTest {

  /** A bound for waits that end at an event; only there to turn a hang into a failure. */
  private static final Duration PATIENCE = Duration.ofSeconds(60);

  @BeforeAll
  static void requireEngine() {
    Prerequisites.requireLocalEngine();
  }

  @Test
  void aCommandInterruptedWhileStartingNeverRuns() throws Exception {
    LocalSandbox sandboxes = new LocalSandbox();
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    Path home = SandboxDisk.upper(sandboxes.engine().dir(ref.id())).resolve("home/sandbox");
    String tag = "cas" + Long.toString(System.nanoTime(), 36);
    try {
      List<Throwable> outcomes = new ArrayList<>();
      List<String> markers = new ArrayList<>();
      int started = 0;
      // Interrupts spread over the first milliseconds of the run, when crun exec is starting,
      // then later and later, until some came before the command started and some after.
      for (int i = 0; i < 60 && (i < 12 || started == 0); i++) {
        String marker = tag + "-" + i;
        markers.add(marker);
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread caller =
            Thread.ofPlatform()
                .start(
                    () -> {
                      try {
                        // the shell stays (not exec'd away), so its command line names the marker
                        ws.run(
                            Command.shell("touch " + marker + "; sleep 600; true"),
                            RunOptions.withTimeout(Duration.ofSeconds(30)));
                      } catch (Throwable t) {
                        thrown.set(t);
                      }
                    });
        Thread.sleep(i < 12 ? i * 2L : (long) i * i);
        caller.interrupt();
        caller.join(PATIENCE);
        assertThat(caller.isAlive()).as("the interrupted run returns").isFalse();
        outcomes.add(thrown.get());
        if (Files.exists(home.resolve(marker))) { // its writable layer, seen from the host
          started++;
        }
      }
      assertThat(outcomes).allSatisfy(t -> assertThat(t).isInstanceOf(CancellationException.class));
      assertThat(started)
          .as(
              "the interrupts spanned the command's start: some came before it (%d of %d ran)",
              started, markers.size())
          .isLessThan(markers.size());
      assertThat(started)
          .as(
              "and some after it started, so that a kill was needed (%d of %d)",
              started, markers.size())
          .isPositive();

      // The event that ends the wait: no process on the host (a crun exec still in flight, or a
      // command's shell in the sandbox) carries a marker. A survivor keeps its for 600 s.
      long end = System.nanoTime() + PATIENCE.toNanos();
      List<String> carrying = carrying(tag);
      while (!carrying.isEmpty() && System.nanoTime() < end) {
        Thread.sleep(50);
        carrying = carrying(tag);
      }
      assertThat(carrying).as("no cancelled command runs on").isEmpty();
      // "[c]as..." matches the tag but not this command's own shell, whose line holds the pattern
      String pattern = "[" + tag.charAt(0) + "]" + tag.substring(1);
      assertThat(ws.run(Command.shell("pgrep -f '" + pattern + "' || true")).stdoutText())
          .as("nothing of theirs inside the sandbox")
          .isEmpty();
    } finally {
      ws.ref().ifPresent(sandboxes::destroy);
    }
  }

  /**
   * The kill's invariant, whatever crun's timing: a process that crun placed in the command's
   * cgroup before it ended is killed, also when crun ended right after placing it (as when crun is
   * killed after the kill's wait for it, or ends by itself once the command is released). Here a
   * stand-in for crun places a process and ends at once, while the kill is already running.
   */
  @Test
  void whatCrunPlacedJustBeforeItEndedIsKilled() throws Exception {
    LocalSandbox sandboxes = new LocalSandbox();
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    Engine engine = sandboxes.engine();
    try {
      for (int i = 0; i < 10; i++) {
        String group = engine.cgroups().newCommandGroup(ref.id());
        Path procs = Path.of(engine.cgroups().commandProcsFile(ref.id(), group));
        Process crun =
            new ProcessBuilder(
                    "/bin/sh", "-c", "sleep 600 & echo $! > \"$1\"; exit 0", "sh", procs.toString())
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start();
        try {
          Exec.killStarting(engine, ref.id(), group, crun);
          assertThat(crun.isAlive()).as("the stand-in for crun has ended").isFalse();
          assertThat(Files.readString(procs).strip())
              .as("attempt %d: nothing of the command is left in its cgroup", i)
              .isEmpty();
        } finally {
          engine.cgroups().killCommand(ref.id(), group);
          engine.cgroups().removeCommandGroup(ref.id(), group);
        }
      }
    } finally {
      ws.ref().ifPresent(sandboxes::destroy);
    }
  }

  /** The command lines of host processes that mention {@code tag}. */
  private static List<String> carrying(String tag) {
    long self = ProcessHandle.current().pid();
    return ProcessHandle.allProcesses()
        .filter(p -> p.pid() != self)
        .map(p -> p.info().commandLine().orElse(""))
        .filter(c -> c.contains(tag) && !c.contains("pgrep"))
        .toList();
  }
}
