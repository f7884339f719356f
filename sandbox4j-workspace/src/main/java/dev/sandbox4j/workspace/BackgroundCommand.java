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
 * taken in pieces, its stdin can be written while it runs, its status polled, and it is stopped
 * politely or killed.
 *
 * <p>Started by {@link Workspace#start(Command, RunOptions)}. The command runs under {@code setsid}
 * in the workspace, so {@link #stop(Duration)} can send SIGTERM to its process group first; {@link
 * #kill()} then ends every process it started, as a cancelled run does. Output not yet taken is
 * bounded: past {@link #MAX_PENDING_BYTES} per stream the oldest bytes are dropped and {@link
 * Output} says how many. The output limit of the options does not apply (a server may log for
 * days); the deadline does.
 *
 * <p>stdin is that of the options: EOF by default, or the bytes or stream they give, then EOF.
 * Started with {@link RunOptions.Builder#keepStdinOpen(boolean) keepStdinOpen(true)}, the command's
 * stdin stays open after those bytes (a REPL, a server that reads commands): {@link #writeStdin}
 * feeds it while it runs, in order, each write reaching the command as soon as it reads, and {@link
 * #closeStdin()} gives it EOF once it has read everything written. Written bytes wait in a buffer
 * of {@link #MAX_PENDING_STDIN_BYTES}; a write that does not fit waits for the command to read
 * (back-pressure, as a pipe does), until the command ends (the deadline of the options ends it) or
 * the writer is interrupted. A write after the command closed its own stdin fails too, as nothing
 * would read it (over a remote workspace the server notices that, not the client: such bytes are
 * dropped there until the command ends).
 *
 * <p>The command belongs to this JVM: if the JVM exits, the command keeps running in the workspace,
 * but nothing collects its output any more. Thread-safe.
 */
public final class BackgroundCommand {

  /** Output kept per stream until taken. */
  public static final int MAX_PENDING_BYTES = 1 << 20;

  /** Written stdin kept until the command reads it; a write waits while this much is pending. */
  public static final int MAX_PENDING_STDIN_BYTES = 1 << 20;

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
  private final StdinFeed stdin; // null unless started with keepStdinOpen
  private volatile Thread runner;

  private BackgroundCommand(Workspace workspace, Command command, StdinFeed stdin) {
    this.id = Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    this.command = command;
    this.workspace = workspace;
    this.pidFile = "/tmp/.sandbox4j-bg-" + id + ".pid";
    this.stdin = stdin;
  }

  static BackgroundCommand start(Workspace workspace, Command command, RunOptions options) {
    StdinFeed feed =
        options.keepStdinOpen()
            ? new StdinFeed(options.stdin().orElse(null), MAX_PENDING_STDIN_BYTES)
            : null;
    BackgroundCommand bg = new BackgroundCommand(workspace, command, feed);
    List<String> argv = new ArrayList<>(List.of("/bin/sh", "-c", LAUNCHER, "sh", bg.pidFile));
    argv.addAll(command.toArgv());
    RunOptions.Builder builder =
        options.toBuilder()
            .outputLimit(Long.MAX_VALUE)
            .retainOutput(false)
            .keepStdinOpen(false)
            .onStdout(chunk -> bg.deliver(bg.stdout, chunk, options.onStdout()))
            .onStderr(chunk -> bg.deliver(bg.stderr, chunk, options.onStderr()));
    if (feed != null) {
      builder.stdin(feed);
    }
    RunOptions background = builder.build();
    workspace.open(); // create or attach before returning, so failures surface here
    bg.runner =
        Thread.ofVirtual()
            .name("sandbox4j-bg-" + bg.id)
            .start(
                // the caller's trace context: the command's span is a child of the caller's span
                io.opentelemetry.context.Context.current()
                    .wrap(
                        () -> {
                          try {
                            bg.runToEnd(argv, background);
                          } finally {
                            if (feed != null) {
                              feed.end(); // also after an Error: no writer waits forever
                            }
                            bg.removePidFile();
                          }
                        }));
    return bg;
  }

  private void runToEnd(List<String> argv, RunOptions background) {
    int code = 0;
    RuntimeException failure = null;
    try {
      code = workspace.run(Command.argv(argv), background).exitCode();
    } catch (CancellationException killed) {
      code = 137; // SIGKILL, as a shell reports it
    } catch (RuntimeException e) {
      failure = e;
    }
    if (stdin != null) {
      // before the end is known: once await() returns, a write fails because the command ended,
      // and a writer waiting for room fails now
      stdin.end();
    }
    if (failure == null) {
      exit.complete(code);
    } else {
      exit.completeExceptionally(failure);
    }
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

  /**
   * Writes {@code bytes} to the command's stdin; they reach it in order, after everything written
   * before. Returns once they are buffered, not once the command has read them (a command that ends
   * meanwhile never does); waits while {@link #MAX_PENDING_STDIN_BYTES} are pending. Concurrent
   * writes do not interleave. If the command ends while a write waits, some of its bytes may have
   * been read.
   *
   * @throws IllegalStateException if the command was not started with {@link
   *     RunOptions.Builder#keepStdinOpen(boolean) keepStdinOpen(true)}, if {@link #closeStdin()}
   *     was called, if the command has ended (before or during the write), or if it closed its
   *     stdin; the message says which
   * @throws InterruptedException if interrupted while waiting for room (some bytes may have been
   *     written)
   */
  public void writeStdin(byte[] bytes) throws InterruptedException {
    java.util.Objects.requireNonNull(bytes, "bytes");
    StdinFeed.Refusal refused = openStdin("write to").write(bytes); // it copies what it keeps
    if (refused != null) {
      throw refusal(refused);
    }
  }

  /** Writes {@code text} to the command's stdin as UTF-8; see {@link #writeStdin(byte[])}. */
  public void writeStdin(String text) throws InterruptedException {
    java.util.Objects.requireNonNull(text, "text");
    writeStdin(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  /**
   * Closes the command's stdin: it reads what was written, then EOF. Returns at once. Closing
   * twice, or once the command has ended, does nothing.
   *
   * @throws IllegalStateException if the command was not started with {@link
   *     RunOptions.Builder#keepStdinOpen(boolean) keepStdinOpen(true)}
   */
  public void closeStdin() {
    openStdin("close").closeForWriting();
  }

  private StdinFeed openStdin(String verb) {
    if (stdin == null) {
      throw new IllegalStateException(
          "cannot "
              + verb
              + " the stdin of background command "
              + id
              + ": it was started without RunOptions.Builder.keepStdinOpen(true), so its stdin"
              + " was only what the options gave, then EOF");
    }
    return stdin;
  }

  private IllegalStateException refusal(StdinFeed.Refusal refused) {
    String why =
        switch (refused) {
          case CLOSED -> "closeStdin() was called";
          case UNREAD -> "the command no longer reads its stdin: it closed it, or it is ending";
          case ENDED ->
              "the command has ended"
                  + (exitCode().isPresent()
                      ? " (exit code " + exitCode().getAsInt() + ")"
                      : failure().map(f -> " (" + f.getMessage() + ")").orElse(""));
        };
    return new IllegalStateException(
        "cannot write to the stdin of background command " + id + ": " + why);
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
