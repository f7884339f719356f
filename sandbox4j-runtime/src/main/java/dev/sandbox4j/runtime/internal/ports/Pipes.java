package dev.sandbox4j.runtime.internal.ports;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;

/** Byte copying between a client and a sandbox, and the small socket chores around it. */
final class Pipes {
  static final int BUFFER = 32 * 1024;

  private Pipes() {}

  /**
   * Copies bytes both ways until both sides are done. Bytes either way stamp the sandbox active;
   * bytes from the client first wake it if it fell asleep since (a kept-alive connection outlives a
   * suspend), checked at most every {@link Activity#WAKE_CHECK_NANOS}.
   */
  static void pipe(Socket client, Socket upstream, Activity activity) throws IOException {
    Thread up =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    copy(client.getInputStream(), upstream.getOutputStream(), activity::wake);
                    upstream.shutdownOutput();
                  } catch (IOException | RuntimeException e) {
                    closeQuietly(upstream); // a broken half breaks the whole
                    closeQuietly(client);
                  }
                });
    try {
      copy(upstream.getInputStream(), client.getOutputStream(), activity::touch);
      client.shutdownOutput();
    } catch (IOException e) {
      closeQuietly(upstream);
      closeQuietly(client);
    }
    try {
      up.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Waits for {@code t} to end, at most {@code millis} (0: no limit); whether it ended. */
  static boolean join(Thread t, long millis) {
    try {
      if (millis == 0) {
        t.join();
      } else {
        t.join(millis);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return !t.isAlive();
  }

  static void copy(InputStream from, OutputStream to, Runnable beforeWrite) throws IOException {
    byte[] buffer = new byte[BUFFER];
    int n;
    while ((n = from.read(buffer)) >= 0) {
      beforeWrite.run();
      to.write(buffer, 0, n);
      to.flush();
    }
  }

  static void closeQuietly(Closeable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (IOException e) {
      // nothing to do
    }
  }
}
