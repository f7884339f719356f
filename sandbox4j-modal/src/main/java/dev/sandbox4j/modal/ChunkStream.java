package dev.sandbox4j.modal;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayDeque;
import java.util.Objects;

/**
 * One output stream of a command, fed with chunks by the thread that reads it from Modal. A full
 * queue holds that thread up, and so the gRPC stream (flow control), instead of filling memory.
 * Closing it drops what is queued and runs {@code onClose}, which cancels the gRPC stream. State:
 * every field under {@code this}.
 */
final class ChunkStream extends InputStream {
  private static final int MAX_QUEUED = 64;

  private final ArrayDeque<byte[]> chunks = new ArrayDeque<>();
  private final Runnable onClose;
  private byte[] current = new byte[0];
  private int position;
  private boolean ended;
  private IOException failure;
  private boolean closed;

  ChunkStream(Runnable onClose) {
    this.onClose = onClose;
  }

  /** Queues a chunk; waits while the queue is full. Returns false once the reader closed. */
  synchronized boolean offer(byte[] chunk) throws InterruptedException {
    while (chunks.size() >= MAX_QUEUED && !closed) {
      wait();
    }
    if (closed) {
      return false;
    }
    chunks.add(chunk);
    notifyAll();
    return true;
  }

  /** The end of the stream: normal with a null {@code error}. */
  synchronized void end(IOException error) {
    if (!ended) {
      ended = true;
      failure = error;
      notifyAll();
    }
  }

  synchronized boolean isClosed() {
    return closed;
  }

  @Override
  public int read() throws IOException {
    byte[] one = new byte[1];
    return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
  }

  @Override
  public synchronized int read(byte[] b, int off, int len) throws IOException {
    Objects.checkFromIndexSize(off, len, b.length);
    if (len == 0) {
      return 0;
    }
    while (position == current.length) {
      if (closed) {
        throw new IOException("stream closed");
      }
      byte[] next = chunks.poll();
      if (next != null) {
        current = next;
        position = 0;
        notifyAll();
        continue;
      }
      if (ended) {
        if (failure != null) {
          throw failure;
        }
        return -1;
      }
      try {
        wait();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.io.InterruptedIOException("interrupted while reading command output");
      }
    }
    int n = Math.min(len, current.length - position);
    System.arraycopy(current, position, b, off, n);
    position += n;
    return n;
  }

  @Override
  public synchronized int available() {
    return current.length - position;
  }

  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      chunks.clear();
      notifyAll();
    }
    onClose.run();
  }
}
