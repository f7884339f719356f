package dev.sandbox4j.runtime.internal.util;

import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Kills a command that prints nothing for too long: every chunk of stdout or stderr resets the
 * clock; a virtual thread sleeps until the limit could be reached, and kills when it is — unless
 * the sandbox is frozen then (suspended): a frozen command cannot print, so time frozen does not
 * count, and the clock starts again.
 */
public final class NoOutputWatchdog implements AutoCloseable {
  private final Duration limit;
  private final BooleanSupplier frozen;
  private final Runnable kill;
  private volatile long lastOutput = System.nanoTime();
  private volatile boolean closed;
  private volatile boolean fired;
  private Thread thread;

  private NoOutputWatchdog(Duration limit, BooleanSupplier frozen, Runnable kill) {
    this.limit = limit;
    this.frozen = frozen;
    this.kill = kill;
  }

  /**
   * Watches from now on.
   *
   * @param frozen whether the command's sandbox is frozen right now
   * @param kill kills the command and every process it started
   */
  public static NoOutputWatchdog start(Duration limit, BooleanSupplier frozen, Runnable kill) {
    NoOutputWatchdog w = new NoOutputWatchdog(limit, frozen, kill);
    w.thread = Thread.ofVirtual().name("sandbox4j-no-output").start(w::watch);
    return w;
  }

  private void watch() {
    long limitNanos = limit.toNanos();
    while (!closed) {
      long silent = System.nanoTime() - lastOutput;
      if (silent >= limitNanos && frozen.getAsBoolean()) {
        lastOutput = System.nanoTime(); // suspended: silence while frozen is not the command's
        continue;
      }
      if (silent >= limitNanos) {
        if (fire()) {
          kill.run();
        }
        return;
      }
      LockSupport.parkNanos(limitNanos - silent);
    }
  }

  /** {@code options} whose output callbacks also reset the clock. */
  public RunOptions watching(RunOptions options) {
    var out = options.onStdout();
    var err = options.onStderr();
    return options.toBuilder()
        .onStdout(
            chunk -> {
              lastOutput = System.nanoTime();
              out.accept(chunk);
            })
        .onStderr(
            chunk -> {
              lastOutput = System.nanoTime();
              err.accept(chunk);
            })
        .build();
  }

  /** Fires unless closed first: a command that ended meanwhile is not reported as killed. */
  private synchronized boolean fire() {
    if (closed) {
      return false;
    }
    fired = true;
    return true;
  }

  /** Whether it killed the command. */
  public boolean fired() {
    return fired;
  }

  /** The exception a killed command raises, with its output so far. */
  public WorkspaceTimeoutException timeout(byte[] stdout, byte[] stderr) {
    return new NoOutput(limit, stdout, stderr);
  }

  /** Stops watching; once this returns, {@link #fired()} no longer changes. */
  @Override
  public synchronized void close() {
    closed = true;
    LockSupport.unpark(thread);
  }

  static String describe(Duration d) {
    if (d.toMillis() % 60_000 == 0) {
      return d.toMinutes() + " min";
    }
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
  }

  /** A timeout whose message says what limit it was. */
  private static final class NoOutput extends WorkspaceTimeoutException {
    private static final long serialVersionUID = 1L;

    NoOutput(Duration limit, byte[] stdout, byte[] stderr) {
      super(limit, stdout, stderr);
    }

    @Override
    public String getMessage() {
      return "command printed nothing for "
          + describe(timeout())
          + " (the no-output limit), so it and every process it started were killed";
    }
  }
}
