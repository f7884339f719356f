package dev.sandbox4j.workspace;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The stdin of a background command started with {@link RunOptions#keepStdinOpen()}: what {@link
 * BackgroundCommand#writeStdin} writes, read by the backend as the command's stdin stream.
 *
 * <p>An optional {@code first} stream (the stdin of the options) is read to its end before any
 * written byte. Written bytes wait in a buffer of at most {@link #capacity} bytes; a writer waits
 * while it is full, until the backend reads, the command ends or the writer is interrupted. States:
 * OPEN → CLOSED ({@link #closeForWriting}: the reader sees EOF once the buffer is empty) and, from
 * either, → ENDED ({@link #end}: the command ended; a waiting writer fails, the reader sees EOF at
 * once). The reader closing the stream (the command closed its stdin, or it is ending and the
 * backend stopped feeding it) refuses later writes and a waiting one: nothing would read them.
 * Every field is guarded by {@code this}; {@link #writing} keeps one writer's bytes together.
 */
final class StdinFeed extends InputStream {

  /** Why a write was refused. */
  enum Refusal {
    /** {@link #closeForWriting} was called. */
    CLOSED,
    /** The command ended. */
    ENDED,
    /** The reader closed the stream: the command closed its stdin, or it is ending. */
    UNREAD
  }

  private final int capacity;
  private final ArrayDeque<byte[]> chunks = new ArrayDeque<>();
  private final ReentrantLock writing = new ReentrantLock();
  private InputStream first;
  private byte[] current;
  private int position;
  private long size;
  private boolean closedForWriting;
  private boolean ended;
  private boolean readerGone;

  StdinFeed(InputStream first, int capacity) {
    if (capacity <= 0) {
      throw new IllegalArgumentException("capacity must be positive, was " + capacity);
    }
    this.first = first;
    this.capacity = capacity;
  }

  /**
   * Queues every byte of {@code bytes}, waiting while the buffer is full.
   *
   * @return null once all of it is queued, else why the rest was refused
   */
  Refusal write(byte[] bytes) throws InterruptedException {
    writing.lockInterruptibly();
    try {
      int at = 0;
      synchronized (this) {
        while (true) {
          if (closedForWriting) {
            return Refusal.CLOSED;
          }
          if (ended) {
            return Refusal.ENDED;
          }
          if (readerGone) {
            return Refusal.UNREAD;
          }
          if (at == bytes.length) {
            return null;
          }
          long room = capacity - size;
          if (room > 0) {
            int n = (int) Math.min(room, bytes.length - at);
            chunks.addLast(Arrays.copyOfRange(bytes, at, at + n));
            size += n;
            at += n;
            notifyAll();
          } else {
            wait();
          }
        }
      }
    } finally {
      writing.unlock();
    }
  }

  /** The reader sees EOF once it has read what is queued. Closing twice, or once ended, is moot. */
  synchronized void closeForWriting() {
    closedForWriting = true;
    notifyAll();
  }

  /** The command ended: nothing more is read, and writers fail. */
  synchronized void end() {
    ended = true;
    chunks.clear();
    current = null;
    size = 0;
    notifyAll();
  }

  @Override
  public int read() throws IOException {
    byte[] one = new byte[1];
    int n = read(one, 0, 1);
    return n < 0 ? -1 : one[0] & 0xff;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    java.util.Objects.checkFromIndexSize(off, len, b.length);
    if (len == 0) {
      return 0;
    }
    InputStream head;
    synchronized (this) {
      head = first;
    }
    if (head != null) {
      int n = head.read(b, off, len); // a failure here kills the command, as for any stdin
      if (n >= 0) {
        return n;
      }
      synchronized (this) {
        first = null;
      }
      head.close();
    }
    synchronized (this) {
      while (current == null || position == current.length) {
        if (ended || readerGone) {
          return -1;
        }
        current = chunks.pollFirst();
        position = 0;
        if (current == null) {
          if (closedForWriting) {
            return -1;
          }
          try {
            wait();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("reading a background command's stdin interrupted");
          }
        }
      }
      int n = Math.min(len, current.length - position);
      System.arraycopy(current, position, b, off, n);
      position += n;
      size -= n;
      notifyAll(); // room for a waiting writer
      return n;
    }
  }

  /** The reader is done: later writes, and one waiting for room, are refused. */
  @Override
  public void close() throws IOException {
    InputStream head;
    synchronized (this) {
      readerGone = true;
      chunks.clear();
      current = null;
      size = 0;
      head = first;
      first = null;
      notifyAll();
    }
    if (head != null) {
      head.close();
    }
  }
}
