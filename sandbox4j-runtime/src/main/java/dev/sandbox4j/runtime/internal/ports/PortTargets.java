package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/**
 * The sandboxes a {@link PortProxy} serves, as a backend shows them: the one thing a backend
 * implements to get port URLs and TCP forwards for its sandboxes. The crun engine's is {@code
 * internal.engine.EnginePorts}; a Docker backend would connect into a container's network namespace
 * the same way.
 *
 * <p>The proxy and the backend share only files under {@link #home()}: the proxy's port ({@code
 * network/proxy-port}), and in each sandbox's {@link #dir directory} its token ({@code port-token})
 * and the forwards asked for ({@code forwards/<port>}).
 *
 * <p>Implementations are called from many virtual threads at once and must be thread-safe.
 */
public interface PortTargets {

  /** The home whose {@code network/proxy-port} the proxy binds. */
  Path home();

  /** The directory holding one directory per sandbox, named by its id, as {@link #dir} gives. */
  Path sandboxes();

  /**
   * The sandbox's directory ({@code sandboxes()/id}): where its token and forwards are kept.
   *
   * @throws IllegalArgumentException if {@code id} is not a well-formed id
   */
  Path dir(String id);

  /** Whether a sandbox of that id exists and can be used (not destroyed, not being destroyed). */
  boolean isAlive(String id);

  /**
   * Stamps the sandbox active, so its idle timer does not suspend it; called before {@link #wake}
   * so that the backend does not put it back to sleep meanwhile.
   */
  void touch(String id);

  /**
   * Brings the sandbox back if it sleeps (suspended, hibernated, stopped), under its lock.
   *
   * @throws WorkspaceUnavailableException if it was destroyed
   */
  void wake(String id);

  /**
   * A socket connected to {@code 127.0.0.1:port} inside the sandbox's network namespace.
   *
   * @throws java.net.ConnectException if nothing listens there
   * @throws NotRunning if the sandbox has no running process to connect through
   */
  SocketChannel connect(String id, int port) throws IOException;

  /** The sandbox's ref as messages name it ({@code local:<id>} for the crun engine's). */
  default String ref(String id) {
    return "local:" + id;
  }

  /** Where a server in a sandbox must listen for the proxy to reach it, for messages. */
  default String listenHint() {
    return "127.0.0.1 or 0.0.0.0";
  }

  /** The error for a sandbox that is gone: {@code sandbox local:<id> is unavailable: <why>}. */
  WorkspaceUnavailableException unavailable(String id, String why);

  /** The sandbox has no running process to connect through; the message says which. */
  final class NotRunning extends IOException {
    private static final long serialVersionUID = 1L;

    public NotRunning(String message, Throwable cause) {
      super(message, cause);
    }
  }
}
