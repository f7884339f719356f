package dev.sandbox4j.runtime.internal.registry;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.TimeUnit;

/**
 * Closes a response body that sends nothing for a while, so that a registry that stops midway (or
 * trickles nothing on purpose) fails the read instead of holding the download forever: a read
 * blocked on the closed stream then throws. One virtual thread per guarded stream, which ends with
 * it.
 */
final class StallGuard {
  private final InputStream in;
  private final long stallNanos;
  private volatile long lastProgress = System.nanoTime();
  private volatile boolean closed;
  private volatile boolean stalled;

  StallGuard(InputStream in, int stallSeconds) {
    this.in = in;
    this.stallNanos = TimeUnit.SECONDS.toNanos(stallSeconds);
  }

  /** The guarded stream; closing it ends the guard. */
  InputStream stream() {
    Thread.ofVirtual().name("registry-stall-guard").start(this::watch);
    return new FilterInputStream(in) {
      @Override
      public int read() throws IOException {
        int b = super.read();
        lastProgress = System.nanoTime();
        return checked(b);
      }

      @Override
      public int read(byte[] buffer, int offset, int length) throws IOException {
        int n;
        try {
          n = super.read(buffer, offset, length);
        } catch (IOException e) {
          if (stalled) {
            throw new IOException("nothing arrived for " + stallNanos / 1_000_000_000L + " s", e);
          }
          throw e;
        }
        lastProgress = System.nanoTime();
        return checked(n);
      }

      @Override
      public void close() throws IOException {
        closed = true;
        super.close();
      }
    };
  }

  private int checked(int n) throws IOException {
    if (stalled) {
      throw new IOException("nothing arrived for " + stallNanos / 1_000_000_000L + " s");
    }
    return n;
  }

  private void watch() {
    try {
      while (!closed) {
        long idle = System.nanoTime() - lastProgress;
        if (idle >= stallNanos) {
          stalled = true;
          in.close();
          return;
        }
        TimeUnit.NANOSECONDS.sleep(Math.min(stallNanos - idle, TimeUnit.SECONDS.toNanos(1)));
      }
    } catch (IOException | InterruptedException e) {
      // closing failed or the JVM is ending: the read fails or ends anyway
    }
  }
}
