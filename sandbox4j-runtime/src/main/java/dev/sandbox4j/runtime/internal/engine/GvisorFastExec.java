package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.util.NoOutputWatchdog;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs one command of a gVisor sandbox through its {@link GvisorHelper} instead of a {@code runsc
 * exec}: the same guarantees as {@link GvisorExec}, at the cost of a fork inside and a few frames.
 *
 * <ol>
 *   <li>The helper forks a keeper (root, a child subreaper, a process group of its own) and reports
 *       its pid; the keeper forks the command, which closes every descriptor of the helper's, takes
 *       on the user ({@code setgroups(0)}, {@code setgid}, {@code setuid}: a non-root user keeps no
 *       capability, as with {@code runsc exec}) and the working directory, and runs the program as
 *       {@code sh -c 'exec "$@"'} would ({@link GvisorExec}'s way), without that shell: looked up
 *       on the command's {@code PATH}, a file without {@code #!} under {@code /bin/sh}, 127 if it
 *       is missing, 126 if it cannot run. Under gVisor the shell's extra exec cost 7-21 ms per
 *       command here.
 *   <li>stdin, stdout and stderr travel as frames; the output limit, the no-output limit, the drain
 *       grace and partial output on a timeout are {@link ProcessCommands#await}'s, as for any
 *       process.
 *   <li>A kill (timeout, no output, cancellation, output limit) asks the helper to stop the
 *       keeper's tree, kill it and then the keeper: everything the command started, setsid'd and
 *       double-forked daemons too, stays the keeper's descendant while it runs. If the helper does
 *       not confirm in time, or is gone, the tree is killed from a {@code runsc exec} of its own.
 * </ol>
 *
 * The command's seccomp filter, capability bounding set and rlimits are the helper's, which {@code
 * runsc exec} gave it as to any root command, and the Sentry is the same.
 */
final class GvisorFastExec {
  /** The longest wait for the helper to report a command's start (its sandbox may be loaded). */
  private static final Duration START_WAIT = Duration.ofSeconds(30);

  private GvisorFastExec() {}

  static CommandResult run(
      Engine engine,
      GvisorHelper helper,
      String id,
      CommandSpec spec,
      RunOptions options,
      long clockStart,
      Duration noOutput) {
    if (!engine.hasShell(id)) {
      throw engine.missingProgram(
          id, "/bin/sh", "commands under gVisor isolation need it; use Isolation.CONTAINER");
    }
    AtomicReference<GvisorHelper.Command> started = new AtomicReference<>();
    NoOutputWatchdog watchdog =
        noOutput == null
            ? null
            : NoOutputWatchdog.start(
                noOutput,
                () -> Freezer.isFrozen(engine.cgroups(), id),
                () -> {
                  GvisorHelper.Command c = started.get();
                  if (c != null) {
                    c.killAll();
                  }
                });
    GvisorHelper.Command command = null;
    try {
      if (watchdog != null) {
        options = watchdog.watching(options);
      }
      RunOptions watched = options;
      command = helper.submit(spec);
      GvisorHelper.Command c = command;
      awaitStart(helper, id, c, watched, clockStart);
      started.set(c);
      if (watchdog != null && watchdog.fired()) { // fired before the command existed
        c.killAll();
      }
      CommandResult result =
          Exec.watched(
              watchdog,
              () ->
                  ProcessCommands.await(
                      c, c.stdout(), c.stderr(), watched, clockStart, c::killAll));
      if (c.lostWhy != null) {
        c.killAll(); // the helper is gone: its tree, from a runsc exec of its own
        throw new WorkspaceException(
            "the exec helper of sandbox local:"
                + id
                + " ended while the command ran ("
                + c.lostWhy
                + "); the command and every process it started were killed. Running it again"
                + " starts a new helper");
      }
      if (c.keeperKilled) {
        throw new WorkspaceException(
            "the process that ran the command in sandbox local:"
                + id
                + " was killed from inside the sandbox (exit "
                + result.exitCode()
                + ")");
      }
      return result;
    } catch (FastExec.HelperGone e) {
      throw new FastExec.HelperGoneException(e);
    } catch (java.io.IOException e) {
      throw new WorkspaceException(
          "cannot start the command in sandbox local:" + id + ": " + e.getMessage(), e);
    } finally {
      if (watchdog != null) {
        watchdog.close();
      }
      if (command != null) {
        try {
          command.stdout().close();
          command.stderr().close();
        } catch (java.io.IOException e) {
          // ours: never thrown
        }
      }
    }
  }

  /**
   * Waits until the helper reports the command's start, bounded by its deadline and {@link
   * #START_WAIT}; on a timeout or cancellation whatever it may have started is killed.
   */
  private static void awaitStart(
      GvisorHelper helper, String id, GvisorHelper.Command c, RunOptions options, long clockStart) {
    long deadline = options.timeout().map(t -> clockStart + t.toNanos()).orElse(Long.MAX_VALUE);
    long wait = Math.min(START_WAIT.toNanos(), Math.max(0, deadline - System.nanoTime()));
    int keeper;
    try {
      keeper = c.started.get(wait, TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      c.killAll();
      Thread.currentThread().interrupt();
      throw new CancellationException(
          "command cancelled by interruption; every process it started was killed");
    } catch (ExecutionException e) {
      keeper = -1;
    } catch (TimeoutException e) {
      c.killAll();
      if (System.nanoTime() - deadline >= 0) {
        throw new WorkspaceTimeoutException(
            options.timeout().orElseThrow(), new byte[0], new byte[0]);
      }
      helper.lose("it did not report a command's start within " + START_WAIT.toSeconds() + " s");
      throw new WorkspaceException(
          "the command could not start in sandbox local:"
              + id
              + ": its exec helper did not answer and was given up");
    }
    if (keeper > 0) {
      return;
    }
    GvisorHelper.Failure f = c.failure;
    if (f != null) {
      if (f.errno() == 11 /* EAGAIN */ && f.stage().startsWith("fork")) {
        throw Exec.atProcessLimit(id);
      }
      throw new WorkspaceException(
          "the command could not start in sandbox local:"
              + id
              + ": cannot "
              + f.stage()
              + ": "
              + HelperCalls.strerror(f.errno()));
    }
    // gone before it answered: the command may have started (the helper's end kills what it
    // still runs), so it is not run again
    throw new WorkspaceException(
        "the command could not start in sandbox local:"
            + id
            + ": its exec helper ended before it answered ("
            + c.lostWhy
            + "); running it again starts a new helper");
  }
}
