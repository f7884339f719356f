package dev.sandbox4j.workspace;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A command running in the background of a workspace: its output is collected as it arrives and
 * taken in pieces, its status polled, and it is stopped politely or killed.
 *
 * <p>Started by {@link Workspace#start(Command, RunOptions)}. The command runs under {@code setsid}
 * in the workspace, so {@link #stop(Duration)} can send SIGTERM to its process group first; {@link
 * #kill()} then ends every process it started, as a cancelled run does. Output not yet taken is
 * bounded: past {@link #MAX_PENDING_BYTES} per stream the oldest bytes are dropped and {@link
 * Output} says how many. The output limit of the options does not apply (a server may log for
 * days); the deadline does.
 *
 * <p>The command belongs to this JVM: if the JVM exits, the command keeps running in the workspace,
 * but nothing collects its output any more. Thread-safe.
 */
public final class BackgroundCommand {

  /** Output kept per stream until taken. */
  public static final int MAX_PENDING_BYTES = 1 << 20;

  private static final SecureRandom RANDOM = new SecureRandom();

  /**
   * Runs the command in a new session and records the session leader's pid, which is its process
   * group's id. {@code setsid -w} forks when the shell already leads a group (the host backend runs
   * every command under setsid) and waits for the child, so the pid is written from inside the new
   * session.
   */
  private static final String LAUNCHER =
      "exec setsid -w /bin/sh -c 'echo $$ > \"$0\"; exec \"$@\"' \"$@\"";

  private static final String TERMINATE =
      // dash's kill takes neither "--" nor "-s": -TERM -PGID is the portable spelling
      "p=$(cat \"$1\" 2>/dev/null) && [ -n \"$p\" ] && kill -TERM \"-$p\" 2>/dev/null; exit 0";

  /**
   * Output taken from a background command since the previous take.
   *
   * @param stdout new stdout
   * @param stderr new stderr
   * @param droppedBytes bytes dropped because they were not taken in time (both streams)
   */
  public record Output(byte[] stdout, byte[] stderr, long droppedBytes) {
    /** Copies the arrays. */
    public Output {
      stdout = stdout.clone();
      stderr = stderr.clone();
    }

    /** stdout as text, invalid UTF-8 replaced. */
    public String stdoutText() {
      return Texts.decode(stdout);
    }

    /** stderr as text, invalid UTF-8 replaced. */
    public String stderrText() {
      return Texts.decode(stderr);
    }
  }

  private final String id;
  private final Command command;
  private final Workspace workspace;
  private final String pidFile;
  private final PendingBytes stdout = new PendingBytes();
  private final PendingBytes stderr = new PendingBytes();
  private final CompletableFuture<Integer> exit = new CompletableFuture<>();
  private volatile Thread runner;

  private BackgroundCommand(Workspace workspace, Command command) {
    this.id = Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    this.command = command;
    this.workspace = workspace;
    this.pidFile = "/tmp/.sandbox4j-bg-" + id + ".pid";
  }

  static BackgroundCommand start(Workspace workspace, Command command, RunOptions options) {
    BackgroundCommand bg = new BackgroundCommand(workspace, command);
    List<String> argv = new ArrayList<>(List.of("/bin/sh", "-c", LAUNCHER, "sh", bg.pidFile));
    argv.addAll(command.toArgv());
    RunOptions background =
        options.toBuilder()
            .outputLimit(Long.MAX_VALUE)
            .retainOutput(false)
            .onStdout(chunk -> bg.deliver(bg.stdout, chunk, options.onStdout()))
            .onStderr(chunk -> bg.deliver(bg.stderr, chunk, options.onStderr()))
            .build();
    workspace.open(); // create or attach before returning, so failures surface here
    bg.runner =
        Thread.ofVirtual()
            .name("sandbox4j-bg-" + bg.id)
            .start(
                () -> {
                  try {
                    bg.exit.complete(workspace.run(Command.argv(argv), background).exitCode());
                  } catch (CancellationException killed) {
                    bg.exit.complete(137); // SIGKILL, as a shell reports it
                  } catch (RuntimeException e) {
                    bg.exit.completeExceptionally(e);
                  } finally {
                    bg.removePidFile();
                  }
                });
    return bg;
  }

  private void deliver(PendingBytes to, byte[] chunk, java.util.function.Consumer<byte[]> also) {
    to.append(chunk);
    also.accept(chunk);
  }

  /** A short id, unique enough to name this command in a tool's output. */
  public String id() {
    return id;
  }

  /** The command as given. */
  public Command command() {
    return command;
  }

  /** Whether the command still runs. */
  public boolean isRunning() {
    return !exit.isDone();
  }

  /**
   * The exit code once it ended ({@code 137} if it was killed), empty while it runs or if it ended
   * with a failure (see {@link #failure()}).
   */
  public OptionalInt exitCode() {
    if (!exit.isDone() || exit.isCompletedExceptionally()) {
      return OptionalInt.empty();
    }
    return OptionalInt.of(exit.join());
  }

  /** Why it ended without an exit code: its deadline passed, or its workspace is gone. */
  public Optional<WorkspaceException> failure() {
    if (!exit.isCompletedExceptionally()) {
      return Optional.empty();
    }
    try {
      exit.join();
      return Optional.empty();
    } catch (java.util.concurrent.CompletionException e) {
      return Optional.of(
          e.getCause() instanceof WorkspaceException w
              ? w
              : new WorkspaceException(String.valueOf(e.getCause()), e.getCause()));
    }
  }

  /** The output that arrived since the previous call. */
  public Output takeOutput() {
    synchronized (this) {
      long dropped = stdout.dropped() + stderr.dropped();
      return new Output(stdout.take(), stderr.take(), dropped);
    }
  }

  /**
   * Waits up to {@code max} for the command to end.
   *
   * @return whether it ended
   */
  public boolean await(Duration max) throws InterruptedException {
    try {
      exit.get(max.toNanos(), TimeUnit.NANOSECONDS);
      return true;
    } catch (TimeoutException e) {
      return false;
    } catch (ExecutionException e) {
      return true;
    }
  }

  /**
   * Sends SIGTERM to the command's process group, waits up to {@code grace} for it to end, then
   * {@link #kill() kills} everything it started. Returns once it has ended.
   */
  public void stop(Duration grace) throws InterruptedException {
    if (!isRunning()) {
      return;
    }
    try {
      workspace.run(
          Command.argv("/bin/sh", "-c", TERMINATE, "sh", pidFile),
          RunOptions.withTimeout(Duration.ofSeconds(30)));
    } catch (WorkspaceException e) {
      // could not signal politely: kill below
    }
    if (!await(grace)) {
      kill();
    }
  }

  /** Kills every process the command started and returns once it has ended. */
  public void kill() throws InterruptedException {
    Thread t = runner;
    if (t != null && isRunning()) {
      t.interrupt();
      try {
        exit.get();
      } catch (ExecutionException e) {
        // ended with a failure: it is over either way
      }
    }
  }

  private void removePidFile() {
    try {
      workspace.run(
          Command.argv("rm", "-f", pidFile), RunOptions.withTimeout(Duration.ofSeconds(30)));
    } catch (RuntimeException e) {
      // the workspace is gone, or busy: a stale pid file in /tmp harms nothing
    }
  }

  @Override
  public String toString() {
    return "BackgroundCommand[" + id + ", " + (isRunning() ? "running" : "ended") + "]";
  }

  /** Bytes not yet taken, bounded: the oldest are dropped first. Guarded by itself. */
  private static final class PendingBytes {
    private final java.util.ArrayDeque<byte[]> chunks = new java.util.ArrayDeque<>();
    private long size;
    private long dropped;

    synchronized void append(byte[] chunk) {
      chunks.addLast(chunk);
      size += chunk.length;
      while (size > MAX_PENDING_BYTES) {
        byte[] first = chunks.removeFirst();
        long excess = size - MAX_PENDING_BYTES;
        if (first.length > excess) {
          chunks.addFirst(java.util.Arrays.copyOfRange(first, (int) excess, first.length));
          size -= excess;
          dropped += excess;
        } else {
          size -= first.length;
          dropped += first.length;
        }
      }
    }

    synchronized byte[] take() {
      byte[] out = new byte[(int) size];
      int at = 0;
      for (byte[] c : chunks) {
        System.arraycopy(c, 0, out, at, c.length);
        at += c.length;
      }
      chunks.clear();
      size = 0;
      return out;
    }

    synchronized long dropped() {
      long d = dropped;
      dropped = 0;
      return d;
    }
  }
}
