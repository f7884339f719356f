package dev.sandbox4j.workspace;

import java.util.Optional;

/**
 * A place workspaces live, by name: it builds backends for refs and destroys workspaces.
 *
 * <p>Implementers: {@link #backend(WorkspaceRef)} and {@link #newBackend()} do no I/O; the backend
 * creates or attaches on first use. Instances are thread-safe.
 */
public interface WorkspaceProvider {

  /** The provider name that appears in its refs, such as {@code local}. */
  String name();

  /**
   * A backend attached to the workspace {@code ref} names, or empty if the ref belongs to another
   * provider. Does no I/O: if the workspace is gone, the backend's first operation raises {@link
   * WorkspaceUnavailableException}.
   *
   * @throws IllegalArgumentException if the ref is this provider's but its id is malformed
   */
  Optional<WorkspaceBackend> backend(WorkspaceRef ref);

  /** A backend that creates a fresh workspace on first use. Does no I/O. */
  WorkspaceBackend newBackend();

  /**
   * Destroys the workspace: kills its processes and deletes its files. A command running in it
   * fails with {@link WorkspaceUnavailableException}. Destroying a workspace that is already gone
   * returns quietly.
   *
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  void destroy(WorkspaceRef ref);
}
