package dev.sandbox4j.server;

import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A command's stdin fed from WebSocket frames: a bounded queue of chunks, so a client that sends
 * faster than the command reads is held back instead of filling memory. {@link #finish} is EOF.
 */
final class StdinPipe extends InputStream {

  private static final byte[] EOF = new byte[0];
  private final BlockingQueue<byte[]> chunks = new ArrayBlockingQueue<>(16);
  private volatile boolean closed;
  private byte[] current;
  private int position;
  private boolean ended;

  /** Queues {@code bytes}; waits while the queue is full, gives up once the reader closed. */
  void feed(byte[] bytes) throws InterruptedException {
    if (bytes.length == 0) {
      return;
    }
    while (!closed) {
      if (chunks.offer(bytes, 100, TimeUnit.MILLISECONDS)) {
        return;
      }
    }
  }

  /**
   * Ends the input: the reader sees EOF after everything queued. Waits while the queue is full, as
   * {@link #feed} does (dropping a chunk to make room lost the client's data), and gives up once
   * the reader closed. A cancel or a closed socket ends the input with {@link #close}, which never
   * waits.
   */
  void finish() throws InterruptedException {
    while (!closed) {
      if (chunks.offer(EOF, 100, TimeUnit.MILLISECONDS)) {
        return;
      }
    }
  }

  @Override
  public int read() throws IOException {
    byte[] one = new byte[1];
    int n = read(one, 0, 1);
    return n < 0 ? -1 : one[0] & 0xff;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (len == 0) {
      return 0;
    }
    while (current == null || position == current.length) {
      if (ended || closed) {
        return -1;
      }
      try {
        current = chunks.take();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.io.InterruptedIOException("stdin read interrupted");
      }
      position = 0;
      if (current == EOF) {
        ended = true;
        return -1;
      }
    }
    int n = Math.min(len, current.length - position);
    System.arraycopy(current, position, b, off, n);
    position += n;
    return n;
  }

  @Override
  public void close() {
    closed = true;
    chunks.clear();
    chunks.offer(EOF);
  }
}
