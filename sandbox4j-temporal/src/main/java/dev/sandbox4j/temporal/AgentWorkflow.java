package dev.sandbox4j.temporal;

import io.temporal.workflow.QueryMethod;
import io.temporal.workflow.WorkflowInterface;
import io.temporal.workflow.WorkflowMethod;

/**
 * The Temporal workflow of one durable agent run (workflow type {@code AgentWorkflow}): the agent
 * loop as workflow code, each model request and tool call an activity. Start it with {@link
 * DurableAgent#start} or a stub of this interface on a task queue where a worker registered by
 * {@link DurableAgent#register} polls.
 *
 * <p>The queries read the run's durable state, from any client, while it runs and after it ended;
 * they are how a caller follows a run that may move from worker to worker (live events go to the
 * worker's {@link DurableEventListener}).
 */
@WorkflowInterface
public interface AgentWorkflow {

  /** Runs the agent on {@code request} until the model answers without calling a tool. */
  @WorkflowMethod
  DurableRunResult run(DurableRunRequest request);

  /**
   * The run's workspace as {@code provider:id}, known once the first activity created or attached
   * it; empty before, or if the agent has no workspace.
   */
  @QueryMethod
  String workspaceRef();

  /**
   * The messages so far (the history the run started with, then this run's) as {@link
   * dev.sandbox4j.agent.Messages} JSON.
   */
  @QueryMethod
  String messages();
}
