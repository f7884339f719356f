package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * A provider that copies a machine into a new one. See {@link dev.sandbox4j.workspace.machine}.
 *
 * <p>The fork belongs to the caller: the provider's {@code destroy} removes it like any other
 * workspace.
 */
public interface SupportsFork {

  /**
   * A new running machine with a copy of {@code ref}'s files and, where the provider can, of its
   * running processes; afterwards the two change and run independently. {@link
   * ForkResult#processesCopied()} says whether the processes were copied and {@link
   * ForkResult#reason()} why not: never silently.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  ForkResult fork(WorkspaceRef ref);

  /**
   * A new machine with a copy of {@code ref}'s files only, starting with no process of the
   * parent's: {@link ForkResult#processesCopied()} is false and the reason says only the files were
   * asked for.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  ForkResult forkFiles(WorkspaceRef ref);
}
