package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * A provider that saves a machine's processes to disk and ends them, freeing their memory. See
 * {@link dev.sandbox4j.workspace.machine}.
 */
public interface SupportsHibernate {

  /**
   * Saves every process of {@code ref}'s machine to disk and ends them, keeping its files; any
   * operation on it (or {@link SupportsSuspend#resume resume}) restores them where they were.
   * Idempotent; a stopped machine stays stopped.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws dev.sandbox4j.workspace.WorkspaceException if the processes cannot be saved (the
   *     message says why, and what became of the machine)
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  void hibernate(WorkspaceRef ref);
}
