package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * What happens during a run, as it happens, for UIs and the CLI ({@link
 * RunConfig.Builder#onEvent}). Events of one run arrive in order, one at a time: on the run's
 * thread, except {@link ToolOutput}, which comes from the thread reading the command's output
 * (always between its call's {@link ToolCallStarted} and {@link ToolCallFinished}). A listener that
 * throws does not fail the run.
 */
public sealed interface AgentEvent {

  /** Text the model is writing. */
  record TextDelta(String text) implements AgentEvent {}

  /** A complete model response, with its tool calls. */
  record ModelResponded(ResponseMessage response) implements AgentEvent {}

  /** A tool call is starting. */
  record ToolCallStarted(String toolCallId, String toolName, String arguments)
      implements AgentEvent {}

  /** Output a running tool produced ({@code stdout} or {@code stderr} of a command). */
  record ToolOutput(String toolCallId, String stream, String text) implements AgentEvent {}

  /**
   * A tool call ended.
   *
   * @param result what the model reads
   * @param outcome whether it returned, failed, or asked the model to retry
   */
  record ToolCallFinished(String toolCallId, String toolName, String result, Outcome outcome)
      implements AgentEvent {}

  /**
   * The run created a workspace: sent as soon as it exists, inside the tool call that first uses it
   * and before that call's command or file operation runs.
   */
  record WorkspaceCreated(WorkspaceRef ref) implements AgentEvent {}

  /** How a tool call ended. */
  enum Outcome {
    RETURNED,
    FAILED,
    RETRY
  }
}
