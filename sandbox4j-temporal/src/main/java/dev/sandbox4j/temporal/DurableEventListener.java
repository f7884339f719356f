package dev.sandbox4j.temporal;

import dev.sandbox4j.agent.AgentEvent;

/**
 * Receives the events of durable runs as the worker that carries out a step produces them: model
 * text deltas, tool calls starting and ending, a command's output, the workspace created. A side
 * channel next to the workflow, not part of its history: an application forwards them (to a queue,
 * a WebSocket) by workflow id.
 *
 * <p>Delivery is at least once per attempt: a step that Temporal retries (after a worker died, say)
 * sends its events again. Events are not replayed when a workflow is replayed, and a worker that
 * dies loses those it had not delivered. The durable record is the workflow's {@link
 * AgentWorkflow#messages()} query. Called on activity threads; must be thread-safe and quick. An
 * exception it throws is logged and does not fail the step.
 */
@FunctionalInterface
public interface DurableEventListener {

  /**
   * One event of the run with {@code workflowId}.
   *
   * @param attempt the activity attempt that produced it (1 for the first), so that a consumer can
   *     tell a retried step's events from the first try's
   */
  void onEvent(String workflowId, int attempt, AgentEvent event);
}
