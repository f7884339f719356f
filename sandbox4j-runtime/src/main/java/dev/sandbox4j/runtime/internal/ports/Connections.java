package dev.sandbox4j.runtime.internal.ports;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * Every socket the port proxy has open, so that closing the proxy ends them all; and the accept
 * loop that serves each client of a listener on its own virtual thread.
 */
final class Connections {
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private final PortProxy.Log log;

  Connections(PortProxy.Log log) {
    this.log = log;
  }

  void add(Socket socket) {
    open.add(socket);
  }

  void remove(Socket socket) {
    open.remove(socket);
  }

  /** Closes every socket still open. */
  void closeAll() {
    open.forEach(Pipes::closeQuietly);
  }

  /** Accepts clients until {@code listener} is closed, serving each on a virtual thread. */
  void acceptLoop(ServerSocket listener, Consumer<Socket> serve) {
    while (!listener.isClosed()) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        if (!listener.isClosed()) {
          log.say("port proxy: accept on " + listener.getLocalPort() + " failed: " + e);
        }
        return;
      }
      open.add(client);
      Thread.ofVirtual()
          .start(
              () -> {
                try {
                  serve.accept(client);
                } finally {
                  open.remove(client);
                  Pipes.closeQuietly(client);
                }
              });
    }
  }
}
