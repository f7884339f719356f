package dev.sandbox4j.temporal;

import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Messages;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Objects;

/**
 * What a durable run is asked: a prompt, a history to continue, and which workspace. Serialized
 * into the workflow's history by Temporal's JSON converter, so its fields are strings.
 *
 * @param prompt the user's prompt
 * @param messageHistory the history to continue as {@link Messages} JSON ({@code []} for none)
 * @param workspace a ref ({@code provider:id}) to attach to, or {@code null}: then the history's
 *     latest ref, else a fresh workspace from the agent's workspace capability
 */
public record DurableRunRequest(String prompt, String messageHistory, String workspace) {

  /**
   * @throws IllegalArgumentException naming the problem if the history is not a message history or
   *     the ref is malformed
   */
  public DurableRunRequest {
    Objects.requireNonNull(prompt, "prompt");
    messageHistory = messageHistory == null || messageHistory.isBlank() ? "[]" : messageHistory;
    Messages.fromJson(messageHistory); // fails here, on the client, naming what is wrong
    if (workspace != null) {
      WorkspaceRef.parse(workspace);
    }
  }

  /** A new conversation, in a fresh workspace. */
  public static DurableRunRequest of(String prompt) {
    return new DurableRunRequest(prompt, "[]", null);
  }

  /** A run continuing {@code history}, in its latest workspace. */
  public static DurableRunRequest continuing(String prompt, List<? extends Message> history) {
    return new DurableRunRequest(prompt, Messages.toJson(history), null);
  }

  /** A new conversation in the workspace {@code ref} names. */
  public static DurableRunRequest in(String prompt, WorkspaceRef ref) {
    return new DurableRunRequest(prompt, "[]", ref.toString());
  }
}
