package dev.sandbox4j.docker;

import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * A docker sandbox's timers, as the local engine's: the engine's own files ({@link Timers}: {@code
 * timers.json} and an {@code activity} stamp) in the sandbox's {@link DockerHome} directory,
 * written at create, stamped by every command, enforced by the daemon's {@link DockerSupervisor}.
 *
 * <p>Which sandboxes have them: every one on the egress network (the engine's defaults, a 24-hour
 * lifetime, unless the builder says otherwise), and one without it (no network, Docker's bridge)
 * only when the builder sets a timer, since its state then needs this host's home and supervisor.
 */
final class DockerTimers {
  private final DockerSandbox sandboxes;
  private final Timers.Config config;
  private final boolean set;

  DockerTimers(DockerSandbox sandboxes, Timers.Config config, boolean set) {
    this.sandboxes = sandboxes;
    this.config = config;
    this.set = set;
  }

  private DockerHome home() {
    return DockerHome.of(sandboxes.daemon().host());
  }

  /**
   * Writes sandbox {@code id}'s timers before its container is created: the builder's, or for a
   * fork ({@code parent} not null) its parent's, the lifetime counted from now. {@code onEgress}:
   * whether it has state here anyway.
   */
  void prepare(String id, String parent, boolean onEgress) {
    DockerHome home = home();
    Path parentDir = parent == null ? null : home.sandbox(parent);
    boolean parentHas = parentDir != null && Timers.read(parentDir).isPresent();
    if (!(parentHas || (parent == null && (onEgress || set)))) {
      return;
    }
    Path dir = home.createSandbox(id, null);
    try {
      if (parentHas) {
        Timers.inherit(parentDir, dir);
      } else {
        Timers.write(dir, config);
      }
    } catch (IOException e) {
      home.removeSandbox(id);
      throw new WorkspaceException("cannot write the timers of docker:" + id + ": " + e, e);
    }
    DockerSupervisor.ensureRunning(home, sandboxes.daemon().host());
  }

  /** Stamps sandbox {@code id} active (a command starts or ends); nothing if it has no timers. */
  void touch(String id) {
    Timers.touch(home().sandbox(id));
  }

  Optional<SandboxTimers> timers(String id) {
    return Timers.read(home().sandbox(id)).map(Timers.Settings::toPublic);
  }

  /** The error for a sandbox a timer ended, if one did. */
  Optional<WorkspaceUnavailableException> ended(String id) {
    Path home = home().dir();
    return Files.isDirectory(home) ? Timers.ended(home, DockerSandbox.NAME, id) : Optional.empty();
  }
}
