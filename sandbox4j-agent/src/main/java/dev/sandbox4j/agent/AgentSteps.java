package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * A run's steps taken one at a time: for an engine that drives the agent loop itself and keeps the
 * run's state between steps, such as a durable workflow ({@code sandbox4j-temporal}), where each
 * step may run in another process.
 *
 * <p>Each step is the code {@link Agent#run} runs for it (the same hooks, tool dispatch, argument
 * validation, error results, retry prompts and event order); what the engine keeps between steps is
 * the messages, the workspace ref, the count of retries in a row and the usage. Every step builds
 * its run context anew from what it is given, attaching to the workspace by its ref. Between steps
 * nothing lives in memory, so a tool that keeps state in memory across calls of one run (Shell's
 * {@code start_command} jobs) does not keep it across steps. The engine owns the loop's order:
 * start once, then model request, tool calls, model request... until a response calls no tool.
 * {@link Capability#afterRun} and {@link Capability#onRunError} are not called: the engine decides
 * how a run ends. Thread-safe.
 */
public final class AgentSteps {

  /**
   * What a run starts with.
   *
   * @param instructions the run's instructions: the agent's, then its capabilities'
   * @param workspace the workspace the run works in, created or attached by {@link #start}; {@code
   *     null} if the agent has no workspace
   * @param maxRequests the run's limit of model requests
   * @param maxToolCalls the run's limit of tool calls
   */
  public record Start(
      String instructions, WorkspaceRef workspace, int maxRequests, int maxToolCalls) {
    public Start {
      Objects.requireNonNull(instructions, "instructions");
    }
  }

  /**
   * One tool call's result.
   *
   * @param result what the model reads: a {@link RequestPart.ToolReturn} or a {@link
   *     RequestPart.RetryPrompt}
   * @param retriesInARow the count of retry prompts in a row by tool name, to pass to the next call
   */
  public record ToolStep(RequestPart result, Map<String, Integer> retriesInARow) {
    public ToolStep {
      Objects.requireNonNull(result, "result");
      retriesInARow = Map.copyOf(retriesInARow);
    }
  }

  private final Agent agent;

  private AgentSteps(Agent agent) {
    this.agent = agent;
  }

  /** The steps of {@code agent}'s runs. */
  public static AgentSteps of(Agent agent) {
    return new AgentSteps(Objects.requireNonNull(agent, "agent"));
  }

  /**
   * Starts a run: the capabilities' {@code beforeRun} hooks and instructions, then the workspace,
   * chosen as {@link Agent#run} chooses it, created or attached now (not on first use) so that its
   * ref is known from the start.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the run's ref names a machine
   *     that is gone
   */
  public Start start(String prompt, RunConfig config) {
    boolean chosen =
        config.workspace() != null || Messages.latestWorkspace(config.messageHistory()).isPresent();
    return agent.newRun(prompt, config, config.onEvent()).startStep(chosen);
  }

  /**
   * One model request on {@code messages} (the history, then the run's messages so far; the last is
   * a request), stamped with usage, model name and {@code workspace} as the loop stamps a response.
   *
   * @throws ModelException if the provider fails
   */
  public ResponseMessage requestModel(
      String prompt,
      List<Message> messages,
      String instructions,
      WorkspaceRef workspace,
      Consumer<AgentEvent> listener) {
    return agent
        .newRun(prompt, config(messages, workspace, listener), listener)
        .modelStep(instructions);
  }

  /**
   * One tool call in {@code workspace}: the tool's result, or a retry prompt, exactly as the loop
   * makes it.
   *
   * @param retriesInARow the previous call's {@link ToolStep#retriesInARow()} (empty at first)
   * @throws UnexpectedModelBehaviorException if a tool exceeded its retries in a row
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine is gone
   */
  public ToolStep callTool(
      String prompt,
      List<Message> messages,
      WorkspaceRef workspace,
      ResponsePart.ToolCall call,
      Map<String, Integer> retriesInARow,
      Consumer<AgentEvent> listener) {
    AgentRun run = agent.newRun(prompt, config(messages, workspace, listener), listener);
    RequestPart result = run.toolStep(call, retriesInARow);
    return new ToolStep(result, run.retriesInARow());
  }

  private static RunConfig config(
      List<Message> messages, WorkspaceRef workspace, Consumer<AgentEvent> listener) {
    RunConfig.Builder config =
        RunConfig.builder().messageHistory(messages).onEvent(Objects.requireNonNull(listener));
    if (workspace != null) {
      config.workspace(workspace);
    }
    return config.build();
  }
}
