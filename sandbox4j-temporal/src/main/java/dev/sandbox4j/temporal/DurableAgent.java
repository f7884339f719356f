package dev.sandbox4j.temporal;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.temporal.internal.AgentActivitiesImpl;
import dev.sandbox4j.temporal.internal.AgentWorkflowImpl;
import dev.sandbox4j.temporal.internal.Failures;
import io.temporal.activity.ActivityOptions;
import io.temporal.client.WorkflowClient;
import io.temporal.client.WorkflowOptions;
import io.temporal.common.RetryOptions;
import io.temporal.worker.Worker;
import io.temporal.workflow.Functions;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/**
 * Makes an {@link Agent}'s runs durable on Temporal: the loop runs as workflow code ({@link
 * AgentWorkflow}), and each step that does I/O is an activity — starting the run (which creates or
 * attaches the workspace, so that its ref is in the workflow's history from the first step), each
 * model request, each tool call. A worker that dies mid-run is replaced by another on the same task
 * queue, which replays the history and carries on in the same workspace.
 *
 * {@snippet :
 * DurableAgent durable = DurableAgent.of(agent);
 * durable.register(factory.newWorker("agents")); // in every worker process of the task queue
 * factory.start();
 * AgentWorkflow run = DurableAgent.start(client, "agents", "run-42", DurableRunRequest.of("..."));
 * DurableRunResult result = WorkflowStub.fromTyped(run).getResult(DurableRunResult.class);
 * }
 *
 * <p>Failures: {@code WorkspaceTimeoutException}, {@code WorkspaceOutputLimitException}, {@code
 * WorkspaceUnavailableException}, {@code WorkspaceReadOnlyException} and the agent's own errors
 * ({@code AgentException} and its subclasses but {@code ModelException}) that leave a step become
 * non-retryable {@code ApplicationFailure}s whose type is the exception's class name, and fail the
 * run. Every other exception (a provider's transient error, a {@code ModelException}, a lost
 * connection) is retried with the step's retry policy. A tool call is at least once: one a dead
 * worker was carrying out runs again, in the same workspace.
 *
 * <p>Temporal never destroys the workspace: a run leaves it as {@link Agent} does, for the
 * application to destroy.
 */
public final class DurableAgent {

  /** Activity type names (the activity interface's methods, prefixed): keys of the options. */
  public static final String START = "Sandbox4jStart";

  public static final String MODEL_REQUEST = "Sandbox4jRequestModel";
  public static final String TOOL_CALL = "Sandbox4jCallTool";

  private final Agent agent;
  private final DurableEventListener listener;
  private final ActivityOptions start;
  private final ActivityOptions model;
  private final ActivityOptions tool;

  private DurableAgent(Builder builder) {
    this.agent = builder.agent;
    this.listener = builder.listener;
    RetryOptions retry = builder.retry.toBuilder().setDoNotRetry(Failures.NON_RETRYABLE).build();
    this.start =
        ActivityOptions.newBuilder()
            .setStartToCloseTimeout(builder.startTimeout)
            .setRetryOptions(retry)
            .build();
    this.model =
        ActivityOptions.newBuilder()
            .setStartToCloseTimeout(builder.modelTimeout)
            .setRetryOptions(retry)
            .build();
    this.tool =
        ActivityOptions.newBuilder()
            .setStartToCloseTimeout(builder.toolTimeout)
            .setHeartbeatTimeout(builder.heartbeatTimeout)
            .setRetryOptions(retry)
            .build();
  }

  /** {@code agent}'s runs made durable, with the default timeouts and retry policy. */
  public static DurableAgent of(Agent agent) {
    return builder(agent).build();
  }

  public static Builder builder(Agent agent) {
    return new Builder(agent);
  }

  /**
   * Registers the workflow and this agent's activities on {@code worker}. Every worker of the task
   * queue must register the same agent (same tools, same capabilities): a run may move between
   * them. Call before the worker factory starts.
   */
  public void register(Worker worker) {
    registerWorkflow(worker);
    registerActivities(worker);
  }

  /**
   * Registers only the workflow (the loop, no I/O) on {@code worker}: for a deployment whose
   * workflow workers and activity workers (which need the sandboxes and the model key) are separate
   * processes.
   */
  public void registerWorkflow(Worker worker) {
    Objects.requireNonNull(worker, "worker");
    worker.registerWorkflowImplementationFactory(
        AgentWorkflow.class,
        (Functions.Func<AgentWorkflow>) AgentWorkflowImpl::new,
        AgentWorkflowImpl.options(Map.of(START, start, MODEL_REQUEST, model, TOOL_CALL, tool)));
  }

  /** Registers only this agent's activities (the steps that do I/O) on {@code worker}. */
  public void registerActivities(Worker worker) {
    Objects.requireNonNull(worker, "worker");
    worker.registerActivitiesImplementations(new AgentActivitiesImpl(agent, listener));
  }

  /**
   * Starts a run as workflow {@code workflowId} on {@code taskQueue} and returns its stub at once:
   * {@code WorkflowStub.fromTyped(stub).getResult(DurableRunResult.class)} waits for it, and its
   * queries follow it.
   */
  public static AgentWorkflow start(
      WorkflowClient client, String taskQueue, String workflowId, DurableRunRequest request) {
    AgentWorkflow stub =
        client.newWorkflowStub(
            AgentWorkflow.class,
            WorkflowOptions.newBuilder()
                .setTaskQueue(Objects.requireNonNull(taskQueue, "taskQueue"))
                .setWorkflowId(Objects.requireNonNull(workflowId, "workflowId"))
                .build());
    WorkflowClient.start(stub::run, Objects.requireNonNull(request, "request"));
    return stub;
  }

  /** Options of a durable agent; every one has a default. */
  public static final class Builder {
    private final Agent agent;
    private DurableEventListener listener = (workflowId, attempt, event) -> {};
    private Duration startTimeout = Duration.ofMinutes(15);
    private Duration modelTimeout = Duration.ofMinutes(10);
    private Duration toolTimeout = Duration.ofHours(1);
    private Duration heartbeatTimeout = Duration.ofSeconds(30);
    private RetryOptions retry =
        RetryOptions.newBuilder()
            .setInitialInterval(Duration.ofSeconds(1))
            .setBackoffCoefficient(2)
            .setMaximumInterval(Duration.ofMinutes(1))
            .setMaximumAttempts(10)
            .build();

    private Builder(Agent agent) {
      this.agent = Objects.requireNonNull(agent, "agent");
    }

    /** Receives the runs' events on the worker that produces them (see the listener's contract). */
    public Builder onEvent(DurableEventListener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** The start step's limit (15 minutes by default): creating a sandbox may build its image. */
    public Builder startTimeout(Duration timeout) {
      this.startTimeout = positive("startTimeout", timeout);
      return this;
    }

    /** One model request's limit, per attempt (10 minutes by default). */
    public Builder modelTimeout(Duration timeout) {
      this.modelTimeout = positive("modelTimeout", timeout);
      return this;
    }

    /** One tool call's limit, per attempt (1 hour by default). */
    public Builder toolTimeout(Duration timeout) {
      this.toolTimeout = positive("toolTimeout", timeout);
      return this;
    }

    /**
     * How long a tool call may go without a heartbeat before Temporal counts its worker as dead and
     * retries it elsewhere (30 s by default). The worker heartbeats a running call three times per
     * period.
     */
    public Builder heartbeatTimeout(Duration timeout) {
      this.heartbeatTimeout = positive("heartbeatTimeout", timeout);
      return this;
    }

    /**
     * The retry policy of every step (1 s doubling up to 1 min, 10 attempts by default). The
     * non-retryable types are added to whatever it says.
     */
    public Builder retry(RetryOptions retry) {
      this.retry = Objects.requireNonNull(retry, "retry");
      return this;
    }

    public DurableAgent build() {
      return new DurableAgent(this);
    }

    private static Duration positive(String what, Duration value) {
      Objects.requireNonNull(value, what);
      if (value.isNegative() || value.isZero()) {
        throw new IllegalArgumentException(what + " must be positive, was " + value);
      }
      return value;
    }
  }
}
