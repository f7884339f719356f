package dev.sandbox4j.temporal;

import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Messages;
import dev.sandbox4j.agent.Usage;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * What a durable run produced, as the workflow's result.
 *
 * @param output the model's final text
 * @param allMessages the history the run started with, then this run's, as {@link Messages} JSON:
 *     pass it to the next run ({@link DurableRunRequest#continuing}) to continue in the same
 *     workspace
 * @param workspace the run's workspace as {@code provider:id}, or {@code null} if it had none
 * @param usage what the run used
 */
public record DurableRunResult(String output, String allMessages, String workspace, Usage usage) {

  public DurableRunResult {
    output = output == null ? "" : output;
    Objects.requireNonNull(allMessages, "allMessages");
    usage = usage == null ? Usage.NONE : usage;
  }

  /** {@link #allMessages()} read back. */
  public List<Message> messageList() {
    return Messages.fromJson(allMessages);
  }

  /** The workspace the run used, if any. */
  public Optional<WorkspaceRef> workspaceRef() {
    return Optional.ofNullable(workspace).map(WorkspaceRef::parse);
  }
}
