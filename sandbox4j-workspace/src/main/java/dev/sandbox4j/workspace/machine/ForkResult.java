package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Objects;

/**
 * What {@link SupportsFork} made: a new machine with a copy of the files, and whether the running
 * processes were copied too.
 *
 * @param ref the new machine
 * @param processesCopied whether the parent's processes run in the fork (live fork); false when
 *     they were not copied, and then {@code reason} says why
 * @param reason why processes were not copied; empty if they were (null becomes empty)
 * @param notCarried when processes were copied, those that were left out, each as the provider
 *     describes it (the local engine: its pid on the host and command line), such as commands still
 *     attached to a caller; empty otherwise (null becomes empty)
 */
public record ForkResult(
    WorkspaceRef ref, boolean processesCopied, String reason, List<String> notCarried) {

  /** Checks the ref and copies the list. */
  public ForkResult {
    Objects.requireNonNull(ref, "ref");
    reason = reason == null ? "" : reason;
    notCarried = notCarried == null ? List.of() : List.copyOf(notCarried);
  }

  /** A result with nothing left out. */
  public ForkResult(WorkspaceRef ref, boolean processesCopied, String reason) {
    this(ref, processesCopied, reason, List.of());
  }
}
