package dev.sandbox4j.workspace.spi;

import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Waits for a started {@link Process} the way the workspace contract requires.
 *
 * <ul>
 *   <li>stdin is fed from {@link RunOptions#stdin()} on its own thread, or closed at once (EOF);
 *   <li>stdout and stderr are read on two virtual threads, passed to the callbacks and kept;
 *   <li>past the deadline, on interruption of the calling thread, or past the output limit, the
 *       backend's {@link TreeKiller} runs and the matching exception is thrown;
 *   <li>after the process exits, output is collected for at most {@link #DRAIN_GRACE} more, so a
 *       background child that keeps the pipe open does not block the return. Its later output is
 *       read and dropped, so it never blocks on a full pipe.
 * </ul>
 */
public final class ProcessCommands {

  /** How long output is still collected after the command exits. */
  public static final Duration DRAIN_GRACE = Duration.ofSeconds(2);

  /** How long to wait for the output of killed processes to end. */
  private static final Duration KILL_DRAIN = Duration.ofSeconds(2);

  /** Kills every process a command started. Must be idempotent and must not throw. */
  @FunctionalInterface
  public interface TreeKiller {
    /** Kills every process the command started and returns once they are dead. */
    void killAll();
  }

  private ProcessCommands() {}

  /**
   * Drives {@code process} to completion.
   *
   * @param process a process started with pipes for stdin, stdout and stderr
   * @param options the run's options
   * @param clockStartNanos {@link System#nanoTime()} when the workspace was acquired: the deadline
   *     counts from there
   * @param killer kills the whole process tree
   * @return the exit code ({@code 128 + signal} for a signalled process) and the output
   * @throws WorkspaceTimeoutException past the deadline, with partial output
   * @throws WorkspaceOutputLimitException past the output limit
   * @throws CancellationException if the calling thread is interrupted (the interrupt flag is set
   *     again)
   */
  public static CommandResult await(
      Process process, RunOptions options, long clockStartNanos, TreeKiller killer) {
    OutputCollector output =
        new OutputCollector(options.outputLimit(), options.onStdout(), options.onStderr());
    output.pump(process.getInputStream(), false);
    output.pump(process.getErrorStream(), true);
    feedStdin(process, options);

    long deadline =
        options.timeout().map(t -> clockStartNanos + t.toNanos()).orElse(Long.MAX_VALUE);
    try {
      CompletableFuture<?> exitOrTrouble =
          CompletableFuture.anyOf(process.onExit(), output.trouble());
      waitUntil(exitOrTrouble, deadline);
      checkTrouble(output, killer, options);
      // Exited: collect what is still in the pipes, but never wait on a background child.
      long drainEnd = Math.min(deadline, System.nanoTime() + DRAIN_GRACE.toNanos());
      try {
        waitUntil(CompletableFuture.anyOf(output.drained(), output.trouble()), drainEnd);
      } catch (TimeoutException stillOpen) {
        // a background child holds the pipe: return what we have
      }
      checkTrouble(output, killer, options);
      output.detach();
      return new CommandResult(process.exitValue(), output.stdout(), output.stderr());
    } catch (TimeoutException e) {
      killer.killAll();
      awaitQuietly(output.drained(), KILL_DRAIN);
      output.detach();
      throw new WorkspaceTimeoutException(
          options.timeout().orElseThrow(), output.stdout(), output.stderr());
    } catch (InterruptedException e) {
      killer.killAll();
      output.detach();
      Thread.currentThread().interrupt();
      throw new CancellationException(
          "command cancelled by interruption; every process it started was killed");
    }
  }

  private static void checkTrouble(OutputCollector output, TreeKiller killer, RunOptions options) {
    if (!output.trouble().isDone()) {
      return;
    }
    killer.killAll();
    output.detach();
    Throwable callbackFailure = output.callbackFailure();
    if (callbackFailure != null) {
      throw new WorkspaceException(
          "an output callback failed, so the command was killed: " + callbackFailure,
          callbackFailure);
    }
    throw new WorkspaceOutputLimitException(
        options.outputLimit(), output.stdout(), output.stderr());
  }

  private static void waitUntil(CompletableFuture<?> future, long deadlineNanos)
      throws TimeoutException, InterruptedException {
    try {
      if (deadlineNanos == Long.MAX_VALUE) {
        future.get();
      } else {
        long remaining = deadlineNanos - System.nanoTime();
        if (remaining <= 0 && !future.isDone()) {
          throw new TimeoutException();
        }
        future.get(Math.max(remaining, 0), TimeUnit.NANOSECONDS);
      }
    } catch (ExecutionException e) {
      throw new IllegalStateException("process wait failed", e.getCause());
    }
  }

  private static void awaitQuietly(CompletableFuture<?> future, Duration max) {
    try {
      future.get(max.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // best effort: partial output is whatever arrived
    }
  }

  private static void feedStdin(Process process, RunOptions options) {
    OutputStream toProcess = process.getOutputStream();
    var stdin = options.stdin();
    if (stdin.isEmpty()) {
      closeQuietly(toProcess);
      return;
    }
    Thread.ofVirtual()
        .name("sandbox4j-stdin-" + process.pid())
        .start(
            () -> {
              try (InputStream in = stdin.get();
                  OutputStream out = toProcess) {
                in.transferTo(out);
              } catch (IOException e) {
                // The command exited or closed stdin before reading everything: that is its
                // choice, not an error of the run.
              }
            });
  }

  private static void closeQuietly(OutputStream stream) {
    try {
      stream.close();
    } catch (IOException e) {
      // nothing to do: the process is gone or never read stdin
    }
  }
}
