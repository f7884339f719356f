package dev.sandbox4j.temporal.internal;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.AgentEvent;
import dev.sandbox4j.agent.AgentSteps;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Messages;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.temporal.DurableEventListener;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.temporal.activity.Activity;
import io.temporal.activity.ActivityExecutionContext;
import io.temporal.activity.ActivityInfo;
import io.temporal.client.ActivityCompletionException;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The activities, on {@link AgentSteps}: each step is the agent's own code for it. Stateless: every
 * call rebuilds its run context from its arguments, so any worker can take any step.
 */
public final class AgentActivitiesImpl implements AgentActivities {

  private static final System.Logger LOG = System.getLogger(AgentActivitiesImpl.class.getName());

  private final AgentSteps steps;
  private final DurableEventListener listener;

  public AgentActivitiesImpl(Agent agent, DurableEventListener listener) {
    this.steps = AgentSteps.of(agent);
    this.listener = listener;
  }

  @Override
  public StartStep start(String prompt, String messageHistory, String workspace) {
    Consumer<AgentEvent> events = events(Activity.getExecutionContext().getInfo());
    return crossing(
        () -> {
          RunConfig.Builder config =
              RunConfig.builder().messageHistory(Messages.fromJson(messageHistory)).onEvent(events);
          if (workspace != null) {
            config.workspace(WorkspaceRef.parse(workspace));
          }
          AgentSteps.Start start = steps.start(prompt, config.build());
          return new StartStep(
              start.instructions(),
              start.workspace() == null ? null : start.workspace().toString(),
              start.maxRequests(),
              start.maxToolCalls());
        });
  }

  @Override
  public String requestModel(
      String prompt, String messages, String instructions, String workspace) {
    Consumer<AgentEvent> events = events(Activity.getExecutionContext().getInfo());
    return crossing(
        () -> {
          ResponseMessage response =
              steps.requestModel(
                  prompt, Messages.fromJson(messages), instructions, ref(workspace), events);
          return Messages.toJson(List.<Message>of(response));
        });
  }

  @Override
  public ToolStepResult callTool(
      String prompt,
      String messages,
      String workspace,
      String toolCallId,
      String toolName,
      String arguments,
      Map<String, Integer> retriesInARow) {
    ActivityExecutionContext context = Activity.getExecutionContext();
    Consumer<AgentEvent> events = events(context.getInfo());
    try (Heartbeats ignored = Heartbeats.start(context, Thread.currentThread())) {
      return crossing(
          () -> {
            AgentSteps.ToolStep step =
                steps.callTool(
                    prompt,
                    Messages.fromJson(messages),
                    ref(workspace),
                    new ResponsePart.ToolCall(toolCallId, toolName, arguments),
                    retriesInARow == null ? Map.of() : retriesInARow,
                    events);
            return switch (step.result()) {
              case RequestPart.ToolReturn r ->
                  new ToolStepResult(false, r.content(), r.error(), step.retriesInARow());
              case RequestPart.RetryPrompt r ->
                  new ToolStepResult(true, r.content(), false, step.retriesInARow());
              case RequestPart.UserPrompt p ->
                  throw new IllegalStateException("a tool call answered with a user prompt");
            };
          });
    }
  }

  private static WorkspaceRef ref(String workspace) {
    return workspace == null ? null : WorkspaceRef.parse(workspace);
  }

  private static <T> T crossing(Supplier<T> step) {
    try {
      return step.get();
    } catch (RuntimeException e) {
      throw Failures.crossing(e);
    }
  }

  private Consumer<AgentEvent> events(ActivityInfo info) {
    String workflowId = info.getWorkflowId();
    int attempt = info.getAttempt();
    return event -> {
      try {
        listener.onEvent(workflowId, attempt, event);
      } catch (RuntimeException e) {
        LOG.log(Level.WARNING, "a durable event listener failed", e);
      }
    };
  }

  /**
   * Heartbeats a running tool call from a virtual thread, three times per heartbeat timeout, so
   * that Temporal notices a dead worker within that timeout instead of the call's whole limit. When
   * the call was cancelled or the worker is shutting down, interrupts the call: the agent then
   * kills the command it runs (and every process it started).
   */
  private static final class Heartbeats implements AutoCloseable {
    private final Thread thread;
    private final Thread call;
    private boolean closed; // guarded by this: no interrupt reaches the call's thread after close

    private Heartbeats(Thread call, ActivityExecutionContext context, Duration every) {
      this.call = call;
      this.thread =
          every == null
              ? null
              : Thread.ofVirtual().name("sandbox4j-heartbeat").start(() -> beat(context, every));
    }

    static Heartbeats start(ActivityExecutionContext context, Thread call) {
      Duration timeout = context.getInfo().getHeartbeatTimeout();
      boolean none = timeout == null || timeout.isZero();
      return new Heartbeats(call, context, none ? null : timeout.dividedBy(3));
    }

    private void beat(ActivityExecutionContext context, Duration every) {
      try {
        while (!Thread.currentThread().isInterrupted()) {
          context.heartbeat(null);
          Thread.sleep(every);
        }
      } catch (InterruptedException e) {
        // the call ended
      } catch (ActivityCompletionException e) {
        synchronized (this) {
          if (!closed) {
            call.interrupt();
          }
        }
      }
    }

    @Override
    public void close() {
      synchronized (this) {
        closed = true;
      }
      if (thread != null) {
        thread.interrupt();
      }
    }
  }
}
