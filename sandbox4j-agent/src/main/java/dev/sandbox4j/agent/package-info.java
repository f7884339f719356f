/**
 * The agent harness: an {@link dev.sandbox4j.agent.Agent} whose tools act in a workspace.
 *
 * <p>The rules a run keeps:
 *
 * <ol>
 *   <li>A run's workspace is chosen once, at its start: the run's option (a backend, a ref, or
 *       new), else the latest ref in its message history, else a fresh one from the first
 *       capability with a workspace provider. A ref no capability handles fails the run before its
 *       first model request.
 *   <li>Nothing is created until something uses it; a ref to a machine that is gone fails the run
 *       with {@code WorkspaceUnavailableException}, never with an empty replacement.
 *   <li>The harness never destroys a workspace; the application (or its hooks) does.
 *   <li>Every model response records the workspace ref in force, so a history continues in its
 *       machine; {@link dev.sandbox4j.agent.Messages#sanitize} removes the refs of a history from
 *       an untrusted client.
 *   <li>Tool arguments are validated against the tool's schema before the tool runs; invalid ones
 *       and {@link dev.sandbox4j.agent.ModelRetryException} go back to the model as retry prompts
 *       (bounded), other tool failures as error results; an unavailable workspace, cancellation and
 *       the agent's own failures end the run.
 *   <li>Cancelling a run kills the command it is running, with everything that command started.
 * </ol>
 */
package dev.sandbox4j.agent;
