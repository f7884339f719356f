package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Optional;

/**
 * What a run produced.
 *
 * @param output the model's final text
 * @param allMessages the history the run started with, then this run's messages: pass it to the
 *     next run to continue the conversation in the same workspace
 * @param newMessages only this run's messages
 * @param usage what this run used
 * @param workspaceRef the workspace the run used, or {@code null} if it used none
 */
public record RunResult(
    String output,
    List<Message> allMessages,
    List<Message> newMessages,
    Usage usage,
    WorkspaceRef workspaceRef) {

  public RunResult {
    output = output == null ? "" : output;
    allMessages = List.copyOf(allMessages);
    newMessages = List.copyOf(newMessages);
  }

  /** The workspace the run used, if any: store it to reattach later, or to destroy it. */
  public Optional<WorkspaceRef> workspace() {
    return Optional.ofNullable(workspaceRef);
  }
}
