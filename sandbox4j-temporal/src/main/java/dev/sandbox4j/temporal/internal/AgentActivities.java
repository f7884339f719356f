package dev.sandbox4j.temporal.internal;

import io.temporal.activity.ActivityInterface;
import java.util.Map;

/**
 * The activities of a durable run: every step that does I/O. Inputs and outputs are JSON strings
 * and small records, so that they sit in the workflow's history as Temporal's JSON converter writes
 * them.
 */
@ActivityInterface(namePrefix = "Sandbox4j")
public interface AgentActivities {

  /** Starts the run: hooks, instructions, and the workspace created or attached. */
  StartStep start(String prompt, String messageHistory, String workspace);

  /** One model request; returns the response as a one-message {@code Messages} JSON array. */
  String requestModel(String prompt, String messages, String instructions, String workspace);

  /** One tool call. */
  ToolStepResult callTool(
      String prompt,
      String messages,
      String workspace,
      String toolCallId,
      String toolName,
      String arguments,
      Map<String, Integer> retriesInARow);

  /** What the start step returns. */
  record StartStep(String instructions, String workspace, int maxRequests, int maxToolCalls) {}

  /**
   * What a tool call returns: a tool result ({@code retry} false) or a retry prompt.
   *
   * @param error for a tool result, whether the tool failed
   */
  record ToolStepResult(
      boolean retry, String content, boolean error, Map<String, Integer> retriesInARow) {}
}
