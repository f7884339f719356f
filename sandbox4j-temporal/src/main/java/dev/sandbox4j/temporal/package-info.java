/**
 * Durable agent runs on Temporal: {@link dev.sandbox4j.temporal.DurableAgent} registers the agent
 * loop as a workflow ({@link dev.sandbox4j.temporal.AgentWorkflow}) and its steps as activities on
 * a worker. The run's workspace is created or attached by the first activity, and its ref is kept
 * in the workflow's state and history, so a run continues in the same machine on whichever worker
 * replays it. Temporal never destroys a workspace.
 */
package dev.sandbox4j.temporal;
