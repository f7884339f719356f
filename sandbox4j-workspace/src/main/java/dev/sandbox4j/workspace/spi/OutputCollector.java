package dev.sandbox4j.workspace.spi;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * Reads a command's stdout and stderr, keeps up to the combined limit, and reports trouble (limit
 * passed, a callback or the stdin source failed). State is guarded by {@code this}; callbacks run
 * outside the lock, on the stream's own reader thread, so each stream's chunks arrive in order.
 */
final class OutputCollector {
  private static final int CHUNK = 64 * 1024;

  private final long limit;
  private final boolean retain;
  private final Consumer<byte[]> onStdout;
  private final Consumer<byte[]> onStderr;
  private final ByteArrayOutputStream stdout = new ByteArrayOutputStream();
  private final ByteArrayOutputStream stderr = new ByteArrayOutputStream();
  private final CompletableFuture<Void> trouble = new CompletableFuture<>();
  private final CompletableFuture<Void> drained = new CompletableFuture<>();
  private final AtomicInteger openStreams = new AtomicInteger(2);
  private final InputStream[] streams = new InputStream[2];
  private final boolean[] ended = new boolean[2];
  private long total;
  private boolean detached;
  private WorkspaceException failure;

  OutputCollector(
      long limit, boolean retain, Consumer<byte[]> onStdout, Consumer<byte[]> onStderr) {
    this.limit = limit;
    this.retain = retain;
    this.onStdout = onStdout;
    this.onStderr = onStderr;
  }

  /**
   * Reads {@code stream} on a platform thread: a read blocked on a pipe that a background child
   * keeps open would pin a virtual thread's carrier for as long as the child lives, and enough of
   * them starve every other virtual thread.
   */
  void pump(InputStream stream, boolean isStderr) {
    synchronized (this) {
      streams[isStderr ? 1 : 0] = stream;
    }
    Thread.ofPlatform()
        .daemon()
        .name(isStderr ? "sandbox4j-stderr" : "sandbox4j-stdout")
        .start(() -> readAll(stream, isStderr));
  }

  private void readAll(InputStream stream, boolean isStderr) {
    byte[] buffer = new byte[CHUNK];
    try (stream) {
      int n;
      while ((n = stream.read(buffer)) >= 0) {
        byte[] chunk = accept(buffer, n, isStderr);
        if (chunk != null) {
          deliver(chunk, isStderr);
        }
      }
    } catch (IOException e) {
      // The pipe was closed under us (the process was destroyed): the output ends here.
    } finally {
      synchronized (this) {
        ended[isStderr ? 1 : 0] = true;
      }
      if (openStreams.decrementAndGet() == 0) {
        drained.complete(null);
      }
    }
  }

  /** Keeps what fits under the limit; returns the chunk to deliver, or null. */
  private synchronized byte[] accept(byte[] buffer, int n, boolean isStderr) {
    if (detached || trouble.isDone()) {
      return null; // read and dropped, so a writer never blocks on a full pipe
    }
    long room = limit - total;
    int kept = (int) Math.min(n, room);
    if (retain) {
      (isStderr ? stderr : stdout).write(buffer, 0, kept);
    }
    total += kept;
    if (n > room) {
      trouble.complete(null);
    }
    return kept > 0 ? Arrays.copyOf(buffer, kept) : null;
  }

  private void deliver(byte[] chunk, boolean isStderr) {
    try {
      (isStderr ? onStderr : onStdout).accept(chunk);
    } catch (RuntimeException | Error e) {
      fail(new WorkspaceException("an output callback failed, so the command was killed: " + e, e));
    }
  }

  /** Reports a failure that must end the command (the first one wins). */
  void fail(WorkspaceException failure) {
    synchronized (this) {
      if (this.failure == null) {
        this.failure = failure;
      }
    }
    trouble.complete(null);
  }

  /** Completes when output passed the limit or {@link #fail} was called. */
  CompletableFuture<Void> trouble() {
    return trouble;
  }

  /** Completes when both streams reached EOF. */
  CompletableFuture<Void> drained() {
    return drained;
  }

  /** The failure that ended the command, or null if the trouble was the output limit. */
  synchronized WorkspaceException failure() {
    return failure;
  }

  /** Stops keeping and delivering output; readers go on draining the pipes until EOF. */
  synchronized void detach() {
    detached = true;
  }

  /** Whether stdout ({@code false}) or stderr ({@code true}) has not reached its end yet. */
  synchronized boolean isOpen(boolean isStderr) {
    return !ended[isStderr ? 1 : 0];
  }

  /**
   * Closes both streams, which ends their readers (those of {@link OutputPipes} wake a blocked
   * read): the output was handed over to someone else, or is dropped.
   */
  void stopReading() {
    InputStream[] toClose;
    synchronized (this) {
      detached = true;
      toClose = streams.clone();
    }
    for (InputStream stream : toClose) {
      if (stream != null) {
        try {
          stream.close();
        } catch (IOException e) {
          // closed already
        }
      }
    }
  }

  synchronized byte[] stdout() {
    return stdout.toByteArray();
  }

  synchronized byte[] stderr() {
    return stderr.toByteArray();
  }
}
