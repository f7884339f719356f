package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Objects;

/**
 * What {@link LocalSandbox#fork} made: a new sandbox with a copy of the files, and whether the
 * running processes were copied too.
 *
 * @param ref the new sandbox
 * @param processesCopied whether the parent's processes run in the fork (live fork, with
 *     checkpoint/restore); false when they could not be copied, and then {@code reason} says why
 * @param reason why processes were not copied (empty if they were)
 * @param notCarried when processes were copied, those that were left out, each as its pid on the
 *     host and command line: commands still attached to a caller (started through {@code
 *     Workspace.run}/{@code start} and still running), and their descendants; empty otherwise
 */
public record ForkResult(
    WorkspaceRef ref, boolean processesCopied, String reason, List<String> notCarried) {
  /** Checks for nulls and copies the list. */
  public ForkResult {
    Objects.requireNonNull(ref, "ref");
    Objects.requireNonNull(reason, "reason");
    notCarried = List.copyOf(notCarried);
  }

  /** A result with nothing left out. */
  public ForkResult(WorkspaceRef ref, boolean processesCopied, String reason) {
    this(ref, processesCopied, reason, List.of());
  }
}
