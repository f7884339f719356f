package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * A provider that freezes a machine's processes, keeping their memory, and thaws them. See {@link
 * dev.sandbox4j.workspace.machine}.
 */
public interface SupportsSuspend {

  /**
   * Freezes every process of {@code ref}'s machine; memory is kept and nothing runs until it is
   * resumed, which any operation on it does by itself. Idempotent; a stopped machine stays stopped.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  void suspend(WorkspaceRef ref);

  /**
   * Wakes {@code ref}'s machine: thaws a suspended one, and starts a stopped or restores a
   * hibernated one where the provider has those states. Idempotent.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  void resume(WorkspaceRef ref);
}
