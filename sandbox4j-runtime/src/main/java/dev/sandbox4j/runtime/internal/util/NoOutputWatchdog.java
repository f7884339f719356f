package dev.sandbox4j.runtime.internal.util;

import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Kills a command that prints nothing for too long: every chunk of stdout or stderr resets the
 * clock, and so does a freeze of its sandbox (a suspend, or a fork or snapshot of it while it
 * runs). A frozen command cannot print, so the clock stays at zero while it is frozen and starts
 * again from the thaw: a resumed command has the whole limit to print again.
 *
 * <p>A virtual thread looks whether the sandbox is frozen every {@linkplain #tick tick} (a tenth of
 * the limit, at most 250 ms), not only when the limit could be reached: a freeze that began and
 * ended between two looks would otherwise count as silence, and a thaw just after a look would
 * leave the resumed command only part of its limit.
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
    long tickNanos = tick(limit).toNanos();
    while (!closed) {
      if (frozen.getAsBoolean()) {
        lastOutput = System.nanoTime(); // silence while frozen is not the command's
        LockSupport.parkNanos(tickNanos);
        continue;
      }
      long silent = System.nanoTime() - lastOutput;
      if (silent >= limitNanos) {
        if (fire()) {
          kill.run();
        }
        return;
      }
      LockSupport.parkNanos(Math.min(tickNanos, limitNanos - silent));
    }
  }

  /** How often the watchdog looks whether the sandbox is frozen: the error of its accounting. */
  static Duration tick(Duration limit) {
    Duration tenth = limit.dividedBy(10);
    Duration most = Duration.ofMillis(250);
    return tenth.compareTo(most) > 0 ? most : tenth.isZero() ? Duration.ofNanos(1) : tenth;
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
