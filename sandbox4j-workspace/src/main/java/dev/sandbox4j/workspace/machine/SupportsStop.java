package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * A provider that ends a machine's processes, keeping its files, and starts it again. See {@link
 * dev.sandbox4j.workspace.machine}.
 */
public interface SupportsStop {

  /**
   * Ends every process of {@code ref}'s machine, keeping its files; the next operation (or {@link
   * #start}) starts it again, with a fresh init. Idempotent.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  void stop(WorkspaceRef ref);

  /**
   * Starts {@code ref}'s stopped machine (and wakes a suspended or hibernated one). Idempotent.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  void start(WorkspaceRef ref);
}
