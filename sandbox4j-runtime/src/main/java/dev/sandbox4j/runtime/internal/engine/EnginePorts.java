package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.ports.PortTargets;
import dev.sandbox4j.runtime.internal.ports.PortTokens;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/**
 * The crun engine as the port proxy sees it ({@link PortTargets}): its sandboxes' directories, its
 * records, its timers' activity stamps and its network namespaces. The port proxy knows nothing
 * else of the engine.
 */
public final class EnginePorts implements PortTargets {
  private final Engine engine;

  public EnginePorts(Engine engine) {
    this.engine = engine;
  }

  /** The writable layer {@code upper} makes, plus a port token if {@code withToken}. */
  public static Engine.UpperLayer creatingWith(boolean withToken, Engine.UpperLayer upper) {
    if (!withToken) {
      return upper;
    }
    return (dir, id) -> {
      PortTokens.writeNewToken(dir);
      upper.prepare(dir, id);
    };
  }

  @Override
  public Path home() {
    return engine.home();
  }

  @Override
  public Path sandboxes() {
    return engine.home().resolve("sandboxes");
  }

  @Override
  public Path dir(String id) {
    return engine.dir(id);
  }

  @Override
  public boolean isAlive(String id) {
    return engine.isAlive(id);
  }

  @Override
  public void touch(String id) {
    Timers.touch(engine.dir(id));
  }

  @Override
  public void wake(String id) {
    engine.wake(id);
  }

  @Override
  public SocketChannel connect(String id, int port) throws IOException {
    try {
      return NetNamespace.connect(engine, id, port);
    } catch (NetNamespace.NotRunning e) {
      throw new PortTargets.NotRunning(e.getMessage(), e);
    }
  }

  @Override
  public WorkspaceUnavailableException unavailable(String id, String why) {
    return Engine.unavailable(id, why);
  }
}
