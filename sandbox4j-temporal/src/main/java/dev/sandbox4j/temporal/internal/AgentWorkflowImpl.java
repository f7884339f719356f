package dev.sandbox4j.temporal.internal;

import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Messages;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.Usage;
import dev.sandbox4j.agent.UsageLimitExceededException;
import dev.sandbox4j.temporal.AgentWorkflow;
import dev.sandbox4j.temporal.DurableRunRequest;
import dev.sandbox4j.temporal.DurableRunResult;
import io.temporal.activity.ActivityOptions;
import io.temporal.failure.ApplicationFailure;
import io.temporal.worker.WorkflowImplementationOptions;
import io.temporal.workflow.Workflow;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The agent loop as workflow code: the order of {@code Agent.run} (start, then model request and
 * the response's tool calls in order, until a response calls none), with every step an activity.
 * Deterministic: no I/O, no clock but Temporal's, no randomness; the state (messages, workspace
 * ref, usage, retries in a row) is rebuilt by replay from the activities' results in the history.
 */
public final class AgentWorkflowImpl implements AgentWorkflow {

  private final AgentActivities steps = Workflow.newActivityStub(AgentActivities.class);
  private final List<Message> messages = new ArrayList<>();
  private String workspace;

  /** The workflow's options: each activity type's timeouts and retry policy. */
  public static WorkflowImplementationOptions options(Map<String, ActivityOptions> byActivity) {
    return WorkflowImplementationOptions.newBuilder().setActivityOptions(byActivity).build();
  }

  @Override
  public DurableRunResult run(DurableRunRequest request) {
    messages.addAll(Messages.fromJson(request.messageHistory()));
    AgentActivities.StartStep start =
        steps.start(request.prompt(), request.messageHistory(), request.workspace());
    workspace = start.workspace();
    messages.add(new RequestMessage(List.of(new RequestPart.UserPrompt(request.prompt())), now()));
    Usage usage = Usage.NONE;
    Map<String, Integer> retries = new HashMap<>();
    while (true) {
      if (usage.requests() >= start.maxRequests()) {
        throw limit("the run reached its limit of " + start.maxRequests() + " model requests");
      }
      String json =
          steps.requestModel(
              request.prompt(), Messages.toJson(messages), start.instructions(), workspace);
      ResponseMessage response = (ResponseMessage) Messages.fromJson(json).getFirst();
      messages.add(response);
      usage = usage.plus(response.usage());
      List<ResponsePart.ToolCall> calls = response.toolCalls();
      if (calls.isEmpty()) {
        return new DurableRunResult(response.text(), Messages.toJson(messages), workspace, usage);
      }
      String before = Messages.toJson(messages);
      List<RequestPart> results = new ArrayList<>();
      for (ResponsePart.ToolCall call : calls) {
        if (usage.toolCalls() >= start.maxToolCalls()) {
          throw limit("the run reached its limit of " + start.maxToolCalls() + " tool calls");
        }
        usage = usage.plus(new Usage(0, 0, 0, 1));
        AgentActivities.ToolStepResult step =
            steps.callTool(
                request.prompt(),
                before,
                workspace,
                call.id(),
                call.toolName(),
                call.arguments(),
                retries);
        retries = new HashMap<>(step.retriesInARow());
        results.add(
            step.retry()
                ? new RequestPart.RetryPrompt(call.id(), call.toolName(), step.content())
                : new RequestPart.ToolReturn(
                    call.id(), call.toolName(), step.content(), step.error()));
      }
      messages.add(new RequestMessage(results, now()));
    }
  }

  @Override
  public String workspaceRef() {
    return workspace == null ? "" : workspace;
  }

  @Override
  public String messages() {
    return Messages.toJson(messages);
  }

  private static Instant now() {
    return Instant.ofEpochMilli(Workflow.currentTimeMillis());
  }

  private static ApplicationFailure limit(String message) {
    return ApplicationFailure.newNonRetryableFailure(
        message, UsageLimitExceededException.class.getName());
  }
}
