package dev.sandbox4j.runtime.internal.egress;

import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The sockets a proxy has open, so that {@link #closeAll} (on the proxy's close) ends every
 * connection; and whether the proxy is closed, which ends the request loops.
 */
final class OpenSockets {
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  void add(Socket socket) {
    open.add(socket);
  }

  void remove(Socket socket) {
    open.remove(socket);
  }

  boolean isClosed() {
    return closed;
  }

  /**
   * Marks the proxy closed, closes its {@code listener} (so nothing more is accepted), then every
   * socket still open.
   */
  void closeAll(ServerSocket listener) {
    closed = true;
    closeQuietly(listener);
    for (Socket s : open) {
      closeQuietly(s);
    }
  }

  static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // closing on the way out: nothing to do about it
    }
  }
}
