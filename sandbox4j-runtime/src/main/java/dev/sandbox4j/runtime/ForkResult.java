package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.Objects;

/**
 * What {@link LocalSandbox#fork} made: a new sandbox with a copy of the files, and whether the
 * running processes were copied too.
 *
 * @param ref the new sandbox
 * @param processesCopied whether the parent's processes run in the fork; the local engine copies
 *     files only, so this is false
 * @param reason why processes were not copied (empty if they were)
 */
public record ForkResult(WorkspaceRef ref, boolean processesCopied, String reason) {
  /** Checks for nulls. */
  public ForkResult {
    Objects.requireNonNull(ref, "ref");
    Objects.requireNonNull(reason, "reason");
  }
}
