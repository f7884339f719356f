package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.Socket;
import java.nio.channels.SocketChannel;

/**
 * Connections into sandboxes: wakes the sandbox if it sleeps, stamps it active, and connects to a
 * port inside it; for an HTTP client, a failure is answered (404, 502) in words the client can act
 * on.
 */
final class Upstreams {
  private final PortTargets targets;

  Upstreams(PortTargets targets) {
    this.targets = targets;
  }

  /**
   * Wakes the sandbox if it sleeps, stamps it active, and connects to its port; on failure answers
   * the client itself and returns null.
   */
  Socket connectForClient(String id, int sandboxPort, OutputStream out) throws IOException {
    String failure;
    try {
      return wakeAndConnect(id, sandboxPort).socket();
    } catch (WorkspaceUnavailableException e) {
      Responses.respond(out, 404, "no sandbox " + targets.ref(id) + " here: " + e.getMessage());
      return null;
    } catch (ConnectException e) {
      failure =
          "nothing listens on port "
              + sandboxPort
              + " in sandbox "
              + targets.ref(id)
              + " (a server must listen on "
              + targets.listenHint()
              + " inside it)";
    } catch (PortTargets.NotRunning e) {
      failure = e.getMessage();
    } catch (IOException | WorkspaceException e) {
      failure =
          "cannot reach port " + sandboxPort + " of " + targets.ref(id) + ": " + e.getMessage();
    }
    Responses.respond(out, 502, failure);
    return null;
  }

  SocketChannel wakeAndConnect(String id, int sandboxPort) throws IOException {
    targets.touch(id); // before waking: the supervisor must not suspend it again
    targets.wake(id);
    SocketChannel channel = targets.connect(id, sandboxPort);
    channel.socket().setTcpNoDelay(true); // a head and its body are two writes: no Nagle wait
    return channel;
  }
}
