package dev.sandbox4j.temporal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.AgentEvent;
import dev.sandbox4j.agent.Capability;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.ModelException;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.agent.tools.FileSystem;
import dev.sandbox4j.agent.tools.Shell;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceReadOnlyException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import io.temporal.client.WorkflowClient;
import io.temporal.client.WorkflowFailedException;
import io.temporal.client.WorkflowStub;
import io.temporal.common.RetryOptions;
import io.temporal.failure.ActivityFailure;
import io.temporal.failure.ApplicationFailure;
import io.temporal.testing.TestEnvironmentOptions;
import io.temporal.testing.TestWorkflowEnvironment;
import io.temporal.worker.WorkerFactory;
import io.temporal.worker.WorkerFactoryOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Durable runs on Temporal's in-process test server (temporal-testing, time skipping; no real
 * Temporal server), in real local sandboxes, with scripted models.
 */
class DurableAgentTest {

  private static final String QUEUE = "sandbox4j-test";
  private static final LocalSandbox ENGINE =
      LocalSandbox.builder().label("test", "temporal").build();

  /** The engine, counting destroy calls: Temporal must never make one. */
  private static final CountingProvider SANDBOXES = new CountingProvider(ENGINE);

  private static WorkspaceRef shared; // one sandbox for the tests that only need one to exist

  private final List<WorkspaceRef> created = new CopyOnWriteArrayList<>();
  private final List<AgentEvent> events = new CopyOnWriteArrayList<>();
  private TestWorkflowEnvironment env;
  private WorkflowClient client;

  @BeforeAll
  static void requireEngine() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Stream.concat(
                Stream.of(Path.of("/usr/local/libexec/sandbox4j/crun")),
                Stream.of(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":"))
                    .filter(dir -> !dir.isEmpty())
                    .map(dir -> Path.of(dir, "crun")))
            .anyMatch(Files::isExecutable),
        "crun (sandbox4j setup)");
    Workspace workspace = Workspace.of(ENGINE.newBackend());
    shared = workspace.open();
  }

  @AfterAll
  static void destroyShared() {
    if (shared != null) {
      ENGINE.destroy(shared);
    }
  }

  @BeforeEach
  void startServer() {
    env = TestWorkflowEnvironment.newInstance();
    client = env.getWorkflowClient();
    SANDBOXES.destroyed.set(0);
  }

  @AfterEach
  void stop() {
    env.close();
    created.forEach(ENGINE::destroy);
  }

  private Agent agent(Function<ModelRequest, ResponseMessage> script, Object... more) {
    Agent.Builder builder =
        Agent.builder()
            .model(FunctionModel.of(script))
            .capability(WorkspaceCapability.of(SANDBOXES))
            .capability(Shell.create())
            .capability(FileSystem.create());
    for (Object extra : more) {
      switch (extra) {
        case Tool tool -> builder.tool(tool);
        case Capability capability -> builder.capability(capability);
        default -> throw new IllegalArgumentException(extra.toString());
      }
    }
    return builder.build();
  }

  private DurableAgent.Builder durable(Agent agent) {
    return DurableAgent.builder(agent).onEvent((id, attempt, event) -> events.add(event));
  }

  private void worker(DurableAgent durable) {
    durable.register(env.newWorker(QUEUE));
    env.start();
  }

  private DurableRunResult run(String id, DurableRunRequest request) {
    AgentWorkflow stub = DurableAgent.start(client, QUEUE, id, request);
    DurableRunResult result = WorkflowStub.fromTyped(stub).getResult(DurableRunResult.class);
    result.workspaceRef().filter(ref -> !ref.equals(shared)).ifPresent(created::add);
    return result;
  }

  /** Responses made so far in the conversation the model is asked about. */
  private static long turn(ModelRequest request) {
    return request.messages().stream().filter(ResponseMessage.class::isInstance).count();
  }

  private static String lastToolResult(ModelRequest request) {
    RequestMessage last = (RequestMessage) request.messages().getLast();
    return switch (last.parts().getFirst()) {
      case RequestPart.ToolReturn r -> r.content();
      case RequestPart.RetryPrompt r -> r.content();
      case RequestPart.UserPrompt p -> p.text();
    };
  }

  @Test
  void aRunCompletesInTheSandboxItCreatedFirst() {
    Agent agent =
        agent(
            request ->
                switch ((int) turn(request)) {
                  case 0 ->
                      ResponseMessage.toolCall(
                          "1", "write_file", "{\"path\": \"notes.txt\", \"content\": \"durable\"}");
                  case 1 ->
                      ResponseMessage.toolCall(
                          "2", "run_command", "{\"command\": \"cat notes.txt; hostname\"}");
                  default -> ResponseMessage.text("saw: " + lastToolResult(request));
                });
    worker(durable(agent).build());

    DurableRunResult result = run("completes", DurableRunRequest.of("write notes"));

    assertThat(result.output()).startsWith("saw: ").contains("durable");
    WorkspaceRef ref = result.workspaceRef().orElseThrow();
    assertThat(ref.provider()).isEqualTo("local");
    // the start activity created the sandbox before the first model request: every response
    // carries its ref, so a later run given this history continues in it
    List<Message> messages = result.messageList();
    assertThat(messages.stream().filter(ResponseMessage.class::isInstance))
        .hasSize(3)
        .allSatisfy(m -> assertThat(((ResponseMessage) m).workspace()).isEqualTo(ref));
    assertThat(result.usage().requests()).isEqualTo(3);
    assertThat(result.usage().toolCalls()).isEqualTo(2);
    assertThat(events)
        .anySatisfy(e -> assertThat(e).isEqualTo(new AgentEvent.WorkspaceCreated(ref)));
    assertThat(events)
        .filteredOn(AgentEvent.ToolOutput.class::isInstance)
        .anySatisfy(e -> assertThat(((AgentEvent.ToolOutput) e).text()).contains("durable"));

    // the sandbox outlives the run: Temporal never destroyed it
    assertThat(SANDBOXES.destroyed).hasValue(0);
    assertThat(Workspace.of(ENGINE.backend(ref).orElseThrow()).readText("notes.txt"))
        .isEqualTo("durable");

    // continuing the history continues in the same sandbox
    DurableRunResult next =
        run("continues", DurableRunRequest.continuing("again", result.messageList()));
    assertThat(next.workspaceRef()).contains(ref);
  }

  @Test
  @Timeout(value = 3, unit = TimeUnit.MINUTES) // a hang fails here, not after JUnit's default
  void aWorkerKilledMidRunIsReplacedAndTheRunEndsInTheSameSandbox() throws Exception {
    CountDownLatch blocked = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Function<ModelRequest, ResponseMessage> script =
        request ->
            switch ((int) turn(request)) {
              case 0 ->
                  ResponseMessage.toolCall(
                      "1", "write_file", "{\"path\": \"before-crash.txt\", \"content\": \"kept\"}");
              case 1 -> ResponseMessage.toolCall("2", "long_step", "{}");
              case 2 ->
                  ResponseMessage.toolCall("3", "read_file", "{\"path\": \"before-crash.txt\"}");
              default -> ResponseMessage.text(lastToolResult(request));
            };
    // the first worker's long step hangs like a dead process: it ignores the interrupt of shutdown
    Tool hangs =
        Tool.of(
            "long_step",
            "A long step.",
            NoArgs.class,
            (context, args) -> {
              blocked.countDown();
              while (true) {
                try {
                  if (release.await(1, TimeUnit.MINUTES)) {
                    return "too late";
                  }
                } catch (InterruptedException ignored) {
                  // a dead worker does not answer
                }
              }
            });
    Tool quick = Tool.of("long_step", "A long step.", NoArgs.class, (context, args) -> "done");
    // The dead worker is noticed after its heartbeat timeout, in real time (the test server does
    // not skip time while an activity runs); the retry then comes after the policy's 20-minute
    // backoff, which the test server's clock skips.
    Duration heartbeat = Duration.ofSeconds(2);
    Duration backoff = Duration.ofMinutes(20);
    RetryOptions retry =
        RetryOptions.newBuilder().setInitialInterval(backoff).setMaximumAttempts(5).build();

    // The workflow runs on the environment's worker, with no workflow cache: every workflow task
    // replays the run from its history, so the loop's state (messages, workspace ref) is rebuilt
    // from it each time. The steps run on activity workers: the first dies mid tool call, and a
    // new one takes over. (The in-process test server keeps a killed worker's pending workflow
    // polls and hands them the next workflow task, which is then lost: killing a workflow worker
    // cannot be shown on it. A real server drops them.)
    env.close();
    env =
        TestWorkflowEnvironment.newInstance(
            TestEnvironmentOptions.newBuilder()
                .setWorkerFactoryOptions(
                    WorkerFactoryOptions.newBuilder().setWorkflowCacheSize(0).build())
                .build());
    client = env.getWorkflowClient();
    durable(agent(script, quick))
        .heartbeatTimeout(heartbeat)
        .retry(retry)
        .build()
        .registerWorkflow(env.newWorker(QUEUE));
    env.start();

    WorkerFactory first = WorkerFactory.newInstance(client);
    durable(agent(script, hangs))
        .heartbeatTimeout(heartbeat)
        .retry(retry)
        .build()
        .registerActivities(first.newWorker(QUEUE));
    first.start();
    AgentWorkflow stub =
        DurableAgent.start(client, QUEUE, "crash", DurableRunRequest.of("survive a crash"));
    WorkerFactory second = WorkerFactory.newInstance(client);
    try {
      assertThat(blocked.await(60, TimeUnit.SECONDS)).as("the long step started").isTrue();
      WorkspaceRef before = WorkspaceRef.parse(stub.workspaceRef());
      created.add(before);
      assertThat(Workspace.of(ENGINE.backend(before).orElseThrow()).readText("before-crash.txt"))
          .isEqualTo("kept");
      // the worker dies: it stops polling, and its hung call's heartbeats stop (heartbeating fails
      // on a worker that was shut down)
      first.shutdownNow();

      long clockBefore = env.currentTimeMillis();
      durable(agent(script, quick))
          .heartbeatTimeout(heartbeat)
          .retry(retry)
          .build()
          .registerActivities(second.newWorker(QUEUE));
      second.start();
      DurableRunResult result;
      try {
        result =
            WorkflowStub.fromTyped(stub).getResult(60, TimeUnit.SECONDS, DurableRunResult.class);
      } catch (TimeoutException e) {
        throw new AssertionError("no result; the histories:\n" + env.getDiagnostics(), e);
      }

      // the new worker carried on in the same sandbox: it read the file the first worker wrote
      // before it died
      assertThat(result.workspaceRef()).contains(before);
      assertThat(result.output()).contains("before-crash.txt").contains("1\tkept");
      assertThat(env.currentTimeMillis() - clockBefore).isGreaterThanOrEqualTo(backoff.toMillis());
      assertThat(SANDBOXES.destroyed).hasValue(0);
    } finally {
      release.countDown();
      second.shutdownNow();
      first.awaitTermination(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void aLongToolCallsRetryBackoffIsSkippedByTheTestServersClock() {
    // a tool call with a 2-hour limit, interrupted the way a worker's shutdown interrupts it (the
    // agent then throws CancellationException, which Temporal retries), and retried after a
    // 20-minute backoff: the in-process test server skips the wait
    AtomicInteger attempts = new AtomicInteger();
    Tool interruptedOnce =
        Tool.of(
            "long_step",
            "A long step.",
            NoArgs.class,
            (context, args) -> {
              if (attempts.incrementAndGet() == 1) {
                throw new CancellationException("the worker is shutting down");
              }
              return "finished on attempt 2";
            });
    Agent agent =
        agent(
            request ->
                turn(request) == 0
                    ? ResponseMessage.toolCall("1", "long_step", "{}")
                    : ResponseMessage.text(lastToolResult(request)),
            interruptedOnce);
    Duration backoff = Duration.ofMinutes(20);
    worker(
        durable(agent)
            .toolTimeout(Duration.ofHours(2))
            .retry(
                RetryOptions.newBuilder().setInitialInterval(backoff).setMaximumAttempts(3).build())
            .build());
    long clockBefore = env.currentTimeMillis();

    DurableRunResult result = run("long-call", DurableRunRequest.in("go", shared));

    assertThat(result.output()).isEqualTo("finished on attempt 2");
    assertThat(env.currentTimeMillis() - clockBefore).isGreaterThanOrEqualTo(backoff.toMillis());
  }

  record NoArgs() {}

  /** A capability whose instructions hook does {@code operation} in the run's workspace. */
  private static Capability failingAtStart(Consumer<Workspace> operation, AtomicInteger attempts) {
    return new Capability() {
      @Override
      public String instructions(RunContext run) {
        attempts.incrementAndGet();
        operation.accept(run.workspace());
        return "";
      }
    };
  }

  private void assertFailsWithoutRetry(
      Class<? extends RuntimeException> type, AtomicInteger attempts, String workspace) {
    AgentWorkflow stub =
        DurableAgent.start(
            client,
            QUEUE,
            "fails-" + type.getSimpleName(),
            new DurableRunRequest("go", "[]", workspace));
    assertThatThrownBy(() -> WorkflowStub.fromTyped(stub).getResult(DurableRunResult.class))
        .isInstanceOf(WorkflowFailedException.class)
        .cause()
        .isInstanceOf(ActivityFailure.class)
        .cause()
        .isInstanceOfSatisfying(
            ApplicationFailure.class,
            failure -> {
              assertThat(failure.getType()).isEqualTo(type.getName());
              assertThat(failure.isNonRetryable()).isTrue();
            });
    assertThat(attempts).as("attempts of the start step").hasValue(1);
  }

  @Test
  void workspaceFailuresEndTheRunWithoutRetry() {
    // each case has its own test server and worker, with an agent whose hook does the operation
    record Case(
        Class<? extends RuntimeException> type, Consumer<Workspace> operation, String ref) {}
    WorkspaceRef gone = Workspace.of(ENGINE.newBackend()).open();
    ENGINE.destroy(gone);
    List<Case> cases =
        List.of(
            new Case(
                WorkspaceTimeoutException.class,
                ws ->
                    ws.run(
                        Command.shell("sleep 30"), RunOptions.withTimeout(Duration.ofMillis(300))),
                shared.toString()),
            new Case(
                WorkspaceOutputLimitException.class,
                ws ->
                    ws.run(
                        Command.shell("head -c 200000 /dev/zero"),
                        RunOptions.builder().outputLimit(1000).build()),
                shared.toString()),
            new Case(
                WorkspaceReadOnlyException.class,
                ws -> ws.readOnly().writeText("refused.txt", "no"),
                shared.toString()),
            new Case(WorkspaceUnavailableException.class, ws -> ws.open(), gone.toString()));
    for (Case each : cases) {
      env.close();
      env = TestWorkflowEnvironment.newInstance();
      client = env.getWorkflowClient();
      AtomicInteger attempts = new AtomicInteger();
      Agent agent =
          agent(
              request -> ResponseMessage.text("unreachable"),
              failingAtStart(each.operation(), attempts));
      worker(durable(agent).build());
      assertFailsWithoutRetry(each.type(), attempts, each.ref());
    }
    assertThat(SANDBOXES.destroyed).hasValue(0);
  }

  @Test
  void aTransientModelErrorIsRetriedByTheActivityPolicy() {
    AtomicInteger calls = new AtomicInteger();
    Agent agent =
        agent(
            request -> {
              if (calls.incrementAndGet() == 1) {
                throw new ModelException("overloaded (a provider's transient error)");
              }
              return ResponseMessage.text("answered");
            });
    worker(durable(agent).build());

    DurableRunResult result = run("transient", DurableRunRequest.in("hi", shared));

    assertThat(result.output()).isEqualTo("answered");
    assertThat(calls).hasValue(2);
    assertThat(result.workspaceRef()).contains(shared);
  }

  /** A provider that passes everything to another and counts destroy calls. */
  static final class CountingProvider implements WorkspaceProvider {
    final AtomicInteger destroyed = new AtomicInteger();
    private final WorkspaceProvider delegate;

    CountingProvider(WorkspaceProvider delegate) {
      this.delegate = delegate;
    }

    @Override
    public String name() {
      return delegate.name();
    }

    @Override
    public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
      return delegate.backend(ref);
    }

    @Override
    public WorkspaceBackend newBackend() {
      return delegate.newBackend();
    }

    @Override
    public void destroy(WorkspaceRef ref) {
      destroyed.incrementAndGet();
      delegate.destroy(ref);
    }
  }
}
