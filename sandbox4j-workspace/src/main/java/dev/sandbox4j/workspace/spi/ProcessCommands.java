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
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs a local {@link Process} the way the workspace contract requires.
 *
 * <ul>
 *   <li>stdin is fed from {@link RunOptions#stdin()} on its own thread, or closed at once (EOF);
 *       each read from the source reaches the command at once (a source that yields bytes as they
 *       are written streams them); a source that fails kills the command rather than ending its
 *       input early;
 *   <li>stdout and stderr are read on two threads, passed to the callbacks and kept;
 *   <li>past the deadline, on interruption of the calling thread, or past the output limit, the
 *       backend's {@link TreeKiller} runs and the matching exception is thrown;
 *   <li>after the process exits, output is collected for at most {@link #DRAIN_GRACE} more, so a
 *       background child that keeps the pipe open does not block the return. Its later output is
 *       handed to a process outside this JVM that reads and drops it ({@link LeftoverOutput}), so
 *       the child never blocks on a full pipe nor gets SIGPIPE, and once the run has returned this
 *       JVM spends no thread and no CPU on it, however long the child writes.
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
   * Where output goes that a background child still writes once the command has returned and the
   * drain grace has passed: into a small process that reads it to its end and drops it (one per
   * pipe still open; it ends by itself once the last writer has closed the pipe: the child exited
   * or was killed). The backend says where that process runs, and so who pays for it: a sandbox's
   * backend puts it into the sandbox's cgroups, so that its process, memory and CPU count against
   * the sandbox's limits, not the host's.
   */
  @FunctionalInterface
  public interface LeftoverOutput {
    /**
     * The argv that runs {@code drainer} where its cost is the command's, for example a wrapper
     * that joins the command's cgroups and then execs {@code drainer}. The wrapper must leave stdin
     * (the pipe) to {@code drainer}, and should end soon: {@code drainer} puts the reading process
     * in the background and exits.
     */
    List<String> wrap(List<String> drainer);

    /** The drainer runs as it is, on the host: for host commands, which isolate nothing. */
    LeftoverOutput HOST = drainer -> drainer;
  }

  /**
   * Reads stdin to its end and drops it, in a background process of its own, so that the process
   * this JVM started exits at once (the JDK spends a thread per child until it exits). A background
   * list's stdin is {@code /dev/null} unless redirected, hence fd 3.
   */
  static final List<String> DRAINER =
      List.of("/bin/sh", "-c", "exec 3<&0 </dev/null; cat <&3 >/dev/null 2>&1 3<&- &", "drain");

  /** Makes the {@link TreeKiller} of a started process. */
  @FunctionalInterface
  public interface KillerFactory {
    /** The killer of every process {@code process} starts. */
    TreeKiller forProcess(Process process);
  }

  /**
   * Starts {@code builder}'s command and drives it to completion. stdout and stderr go to pipes
   * that stay open until every process holding them has closed them (on Linux), so output a
   * background child writes within the drain grace is kept and it never gets SIGPIPE from a closed
   * reader; the builder's stdout/stderr redirects are replaced.
   *
   * @param builder the command, its directory and environment
   * @param options the run's options
   * @param clockStartNanos {@link System#nanoTime()} when the workspace was acquired: the deadline
   *     counts from there
   * @param killer makes the killer of the whole process tree
   * @return the exit code ({@code 128 + signal} for a signalled process) and the output
   * @throws IOException if the process cannot be started
   * @throws WorkspaceTimeoutException past the deadline, with partial output
   * @throws WorkspaceOutputLimitException past the output limit
   * @throws CancellationException if the calling thread is interrupted (the interrupt flag is set
   *     again)
   */
  public static CommandResult run(
      ProcessBuilder builder, RunOptions options, long clockStartNanos, KillerFactory killer)
      throws IOException {
    return run(builder, options, clockStartNanos, killer, LeftoverOutput.HOST);
  }

  /**
   * {@link #run(ProcessBuilder, RunOptions, long, KillerFactory)}, where output still arriving
   * after the drain grace goes to a drainer that {@code leftover} places.
   */
  public static CommandResult run(
      ProcessBuilder builder,
      RunOptions options,
      long clockStartNanos,
      KillerFactory killer,
      LeftoverOutput leftover)
      throws IOException {
    return run(
        (stdout, stderr) -> {
          builder.redirectOutput(stdout);
          builder.redirectError(stderr);
          return builder.start();
        },
        options,
        clockStartNanos,
        killer,
        leftover);
  }

  /**
   * Starts a command's process, its stdout and stderr going to {@code stdout} and {@code stderr}:
   * for a backend whose command is not a {@link ProcessBuilder}'s (one that a helper forks, say).
   */
  @FunctionalInterface
  public interface Launcher {
    /**
     * Starts the command. Where the redirects are {@linkplain ProcessBuilder.Redirect#file files}
     * ({@code /proc/self/fd/N} of a pipe's write end, valid until this returns), the command must
     * write to those pipes; where they are {@link ProcessBuilder.Redirect#PIPE}, the returned
     * process's own streams are read.
     */
    Process start(ProcessBuilder.Redirect stdout, ProcessBuilder.Redirect stderr)
        throws IOException;
  }

  /**
   * {@link #run(ProcessBuilder, RunOptions, long, KillerFactory, LeftoverOutput)} for a command
   * that {@code launcher} starts. The process it returns gives the command's stdin ({@link
   * Process#getOutputStream}), its exit ({@link Process#onExit}, {@link Process#exitValue}) and its
   * pid (a name only).
   */
  public static CommandResult run(
      Launcher launcher,
      RunOptions options,
      long clockStartNanos,
      KillerFactory killer,
      LeftoverOutput leftover)
      throws IOException {
    OutputPipes pipes = OutputPipes.open();
    Process process;
    try {
      process =
          pipes == null
              ? launcher.start(ProcessBuilder.Redirect.PIPE, ProcessBuilder.Redirect.PIPE)
              : launcher.start(
                  ProcessBuilder.Redirect.to(pipes.writeEnd(false)),
                  ProcessBuilder.Redirect.to(pipes.writeEnd(true)));
    } catch (IOException | RuntimeException e) {
      if (pipes != null) {
        pipes.close();
      }
      throw e;
    }
    InputStream stdout;
    InputStream stderr;
    if (pipes != null) {
      pipes.closeWriteEnds();
      try {
        stdout = pipes.stdout();
        stderr = pipes.stderr();
      } catch (IOException | RuntimeException e) {
        killer.forProcess(process).killAll();
        pipes.close();
        throw e;
      }
    } else {
      stdout = process.getInputStream();
      stderr = process.getErrorStream();
    }
    OutputCollector output =
        new OutputCollector(
            options.outputLimit(), options.retainOutput(), options.onStdout(), options.onStderr());
    try {
      return await(
          process, stdout, stderr, output, options, clockStartNanos, killer.forProcess(process));
    } finally {
      if (pipes != null) {
        handOver(pipes, output, leftover);
      }
    }
  }

  /**
   * Drives a process that this JVM did not start as a local child (a Docker exec, say) to
   * completion, by the rules of {@link #run(ProcessBuilder, RunOptions, long, KillerFactory)}:
   * {@code process} gives the command's stdin ({@link Process#getOutputStream}, whose close must be
   * the command's EOF) and its exit ({@link Process#onExit}, {@link Process#exitValue}); {@code
   * stdout} and {@code stderr} are its output. Once the run is over both streams are closed, which
   * must end whatever feeds them; output a background child writes later is the backend's to drop.
   *
   * @param clockStartNanos {@link System#nanoTime()} when the workspace was acquired
   * @param killer kills every process the command started
   */
  public static CommandResult await(
      Process process,
      InputStream stdout,
      InputStream stderr,
      RunOptions options,
      long clockStartNanos,
      TreeKiller killer) {
    OutputCollector output =
        new OutputCollector(
            options.outputLimit(), options.retainOutput(), options.onStdout(), options.onStderr());
    try {
      return await(process, stdout, stderr, output, options, clockStartNanos, killer);
    } finally {
      output.stopReading();
    }
  }

  /**
   * Once the run is over: gives each pipe a background child still holds to a drainer, then ends
   * this JVM's readers and closes its descriptors. If the drainer cannot start, the pipe simply
   * loses its reader (the child's next write fails with EPIPE): never an unbounded cost here.
   */
  private static void handOver(OutputPipes pipes, OutputCollector output, LeftoverOutput leftover) {
    output.detach();
    for (boolean isStderr : new boolean[] {false, true}) {
      if (!output.isOpen(isStderr)) {
        continue;
      }
      ProcessBuilder drainer = new ProcessBuilder(leftover.wrap(DRAINER));
      drainer.environment().clear();
      drainer.environment().put("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
      drainer.redirectInput(pipes.readEnd(isStderr));
      drainer.redirectOutput(ProcessBuilder.Redirect.DISCARD);
      drainer.redirectError(ProcessBuilder.Redirect.DISCARD);
      try {
        drainer.start(); // it exits at once, its reader left in the background; the JDK reaps it
      } catch (IOException | RuntimeException e) {
        // no drainer: the pipe loses its reader below
      }
    }
    output.stopReading();
    pipes.close();
  }

  private static CommandResult await(
      Process process,
      InputStream stdout,
      InputStream stderr,
      OutputCollector output,
      RunOptions options,
      long clockStartNanos,
      TreeKiller killer) {
    output.pump(stdout, false);
    output.pump(stderr, true);
    feedStdin(process, options, output);

    long deadline =
        options.timeout().map(t -> clockStartNanos + t.toNanos()).orElse(Long.MAX_VALUE);
    try {
      CompletableFuture<?> exitOrTrouble =
          CompletableFuture.anyOf(process.onExit(), output.trouble());
      waitUntil(exitOrTrouble, deadline);
      checkTrouble(process, output, killer, options);
      // Exited: collect what is still in the pipes, but never wait on a background child.
      long drainEnd = Math.min(deadline, System.nanoTime() + DRAIN_GRACE.toNanos());
      try {
        waitUntil(CompletableFuture.anyOf(output.drained(), output.trouble()), drainEnd);
      } catch (TimeoutException stillOpen) {
        // a background child holds the pipe: return what we have
      }
      checkTrouble(process, output, killer, options);
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

  private static void checkTrouble(
      Process process, OutputCollector output, TreeKiller killer, RunOptions options) {
    if (!output.trouble().isDone()) {
      return;
    }
    killer.killAll();
    closeQuietly(process.getOutputStream());
    output.detach();
    WorkspaceException failure = output.failure();
    if (failure != null) {
      throw failure;
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

  /**
   * Copies the stdin source to the process, then closes its stdin. If the source itself fails,
   * stdin is left open and the command is killed: closing it would tell the command that its input
   * was complete, and a {@code cat > file} would commit a truncated file.
   */
  private static void feedStdin(Process process, RunOptions options, OutputCollector output) {
    OutputStream toProcess = process.getOutputStream();
    var stdin = options.stdin();
    if (stdin.isEmpty()) {
      closeQuietly(toProcess);
      return;
    }
    Thread.ofPlatform() // blocks on a pipe write: see OutputCollector#pump
        .daemon()
        .name("sandbox4j-stdin-" + process.pid())
        .start(
            () -> {
              byte[] buffer = new byte[64 * 1024];
              try (InputStream in = stdin.get()) {
                while (true) {
                  int n;
                  try {
                    n = in.read(buffer);
                  } catch (IOException | RuntimeException e) {
                    output.fail(
                        new WorkspaceException(
                            "reading the command's stdin failed, so the command was killed: " + e,
                            e));
                    return;
                  }
                  if (n < 0) {
                    break;
                  }
                  toProcess.write(buffer, 0, n);
                  // the JDK buffers a process's stdin: without a flush, a short write would wait
                  // for 8 KiB more, or EOF, and a REPL fed a line at a time would never answer
                  toProcess.flush();
                }
                toProcess.close();
              } catch (IOException e) {
                // The command exited or closed stdin before reading everything: that is its
                // choice, not an error of the run.
                closeQuietly(toProcess);
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
