package dev.sandbox4j.workspace;

import java.util.Optional;

/**
 * The required core of a place where a workspace lives. What else it can do is declared by
 * implementing the optional capabilities {@link SupportsCommands}, {@link SupportsFileSystem} and
 * {@link SupportsRealpath}; callers use {@link Workspace}, which checks them.
 *
 * <p>Implementers: construction must do no I/O; the first operation creates the workspace (or
 * attaches to the one a ref names) exactly once, even under concurrent first use, and attaching to
 * a workspace that is gone raises {@link WorkspaceUnavailableException} rather than creating one.
 * Every method is called with absolute, {@link Workspace#resolve(String) resolved} paths and must
 * be thread-safe. A backend never destroys its workspace on its own.
 */
public interface WorkspaceBackend {

  /** The workspace's ref, or empty while it has not been created yet. Does no I/O. */
  Optional<WorkspaceRef> ref();

  /**
   * The absolute, canonical directory commands start in and relative paths resolve against. Creates
   * or attaches to the workspace if that has not happened yet.
   *
   * @throws WorkspaceUnavailableException if the workspace is gone
   */
  String workingDirectory();
}
