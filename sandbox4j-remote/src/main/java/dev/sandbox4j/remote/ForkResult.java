package dev.sandbox4j.remote;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Objects;

/**
 * What a fork on a server made: the new sandbox and whether its processes were copied.
 *
 * @param ref the new sandbox
 * @param processesCopied whether running processes were copied (checkpoint/restore)
 * @param reason why they were not, or null
 * @param notCarried processes left out although others were copied (commands still attached)
 */
public record ForkResult(
    WorkspaceRef ref, boolean processesCopied, String reason, List<String> notCarried) {

  /** Copies the list. */
  public ForkResult {
    Objects.requireNonNull(ref, "ref");
    notCarried = notCarried == null ? List.of() : List.copyOf(notCarried);
  }
}
