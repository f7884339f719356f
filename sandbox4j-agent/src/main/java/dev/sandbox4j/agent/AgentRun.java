package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import java.lang.System.Logger.Level;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.function.Consumer;

/**
 * One run: the loop of model requests and tool calls, and the {@link RunContext} hooks and tools
 * see. Runs on one thread; the fields other threads may read (messages, usage) are guarded by
 * {@code this}.
 */
final class AgentRun implements RunContext {

  private static final System.Logger LOG = System.getLogger(AgentRun.class.getName());

  private final Model model;
  private final String agentInstructions;
  private final List<Capability> capabilities;
  private final Map<String, Tool> tools;
  private final List<ToolDefinition> definitions;
  private final ModelSettings settings;
  private final int maxRequests;
  private final int maxToolCalls;
  private final String prompt;
  private final Consumer<AgentEvent> listener;
  private final WorkspaceSession session;
  private final List<Message> history;
  private final List<Message> newMessages = new ArrayList<>();
  private final Map<String, Integer> retries = new HashMap<>();
  private final RunTelemetry telemetry;
  private final io.opentelemetry.context.Context
      parent; // where the run was started: its span is the run span's parent
  private Usage usage = Usage.NONE;

  AgentRun(
      Model model,
      String agentInstructions,
      List<Capability> capabilities,
      Map<String, Tool> tools,
      ModelSettings settings,
      int maxRequests,
      int maxToolCalls,
      String prompt,
      RunConfig config,
      Consumer<AgentEvent> listener,
      SandboxTelemetry telemetry,
      OpenTelemetry openTelemetry,
      io.opentelemetry.context.Context parent) {
    this.telemetry = new RunTelemetry(telemetry);
    this.parent = parent;
    this.model = model;
    this.agentInstructions = agentInstructions;
    this.capabilities = capabilities;
    this.tools = tools;
    this.definitions = tools.values().stream().map(Tool::definition).toList();
    this.settings = settings;
    this.maxRequests = maxRequests;
    this.maxToolCalls = maxToolCalls;
    this.prompt = prompt;
    this.listener = listener;
    this.history = config.messageHistory();
    this.session =
        new WorkspaceSession(
            config.workspace(),
            history,
            capabilities.stream()
                .map(Capability::workspaceProvider)
                .flatMap(Optional::stream)
                .toList(),
            ref -> emit(new AgentEvent.WorkspaceCreated(ref)),
            openTelemetry);
  }

  @Override
  public String prompt() {
    return prompt;
  }

  @Override
  public Workspace workspace() {
    return session.workspace();
  }

  @Override
  public Optional<WorkspaceRef> workspaceRef() {
    return session.ref();
  }

  @Override
  public synchronized List<Message> messages() {
    List<Message> all = new ArrayList<>(history);
    all.addAll(newMessages);
    return List.copyOf(all);
  }

  @Override
  public synchronized Usage usage() {
    return usage;
  }

  RunResult execute() {
    Span span = telemetry.startRun(parent, model.name());
    try (Scope ignored = span.makeCurrent()) {
      return executeInSpan();
    } catch (RuntimeException | Error e) {
      SandboxTelemetry.recordFailure(span, e);
      throw e;
    } finally {
      telemetry.endRun(span, span.isRecording() ? session.ref() : Optional.empty(), usage());
    }
  }

  private RunResult executeInSpan() {
    try {
      RunResult result = loop();
      for (Capability capability : capabilities) {
        capability.afterRun(this, result);
      }
      return result;
    } catch (RuntimeException error) {
      RuntimeException current = error;
      for (Capability capability : capabilities) {
        try {
          RunResult recovered = capability.onRunError(this, current);
          if (recovered != null) {
            // a recovered run ends like one that succeeded: every capability's afterRun sees it
            // (Shell stops the run's background commands there)
            for (Capability each : capabilities) {
              each.afterRun(this, recovered);
            }
            return recovered;
          }
        } catch (RuntimeException next) {
          current = next;
        }
      }
      throw current;
    }
  }

  private RunResult loop() {
    for (Capability capability : capabilities) {
      capability.beforeRun(this);
      session.announceIfCreated();
    }
    String instructions = instructions();
    append(RequestMessage.userPrompt(prompt));
    while (true) {
      checkCancelled();
      if (usage().requests() >= maxRequests) {
        throw new UsageLimitExceededException(
            "the run reached its limit of " + maxRequests + " model requests");
      }
      ResponseMessage response = request(instructions);
      response =
          response.withUsage(
              new Usage(1, response.usage().inputTokens(), response.usage().outputTokens(), 0),
              response.modelName().isEmpty() ? model.name() : response.modelName());
      response = response.withWorkspace(session.ref().orElse(null));
      int index = append(response);
      emit(new AgentEvent.ModelResponded(response));
      List<ResponsePart.ToolCall> calls = response.toolCalls();
      if (calls.isEmpty()) {
        return result(response.text());
      }
      List<RequestPart> results = new ArrayList<>();
      for (ResponsePart.ToolCall call : calls) {
        results.add(callTool(call));
      }
      if (response.workspace() == null && session.ref().isPresent()) {
        // the tools of this response created the workspace: it is the ref in force for them
        replace(index, response.withWorkspace(session.ref().get()));
      }
      append(new RequestMessage(results, Instant.now()));
    }
  }

  private ResponseMessage request(String instructions) {
    Span span = telemetry.startChat(model.name());
    try (Scope ignored = span.makeCurrent()) {
      ResponseMessage response =
          model.request(
              new ModelRequest(messages(), instructions, definitions, settings),
              delta -> emit(new AgentEvent.TextDelta(delta)));
      RunTelemetry.responded(span, response);
      return response;
    } catch (RuntimeException | Error e) {
      SandboxTelemetry.recordFailure(span, e);
      throw e;
    } finally {
      span.end();
    }
  }

  private String instructions() {
    StringBuilder all = new StringBuilder(agentInstructions);
    for (Capability capability : capabilities) {
      String more = capability.instructions(this);
      session.announceIfCreated();
      if (more != null && !more.isBlank()) {
        if (!all.isEmpty()) {
          all.append("\n\n");
        }
        all.append(more.strip());
      }
    }
    return all.toString();
  }

  private RequestPart callTool(ResponsePart.ToolCall call) {
    Span span = telemetry.startTool(call);
    try (Scope ignored = span.makeCurrent()) {
      return callToolInSpan(call, span);
    } catch (RuntimeException | Error e) {
      SandboxTelemetry.recordFailure(span, e);
      throw e;
    } finally {
      telemetry.endTool(span, span.isRecording() ? session.ref() : Optional.empty());
    }
  }

  private RequestPart callToolInSpan(ResponsePart.ToolCall call, Span span) {
    checkCancelled();
    synchronized (this) {
      if (usage.toolCalls() >= maxToolCalls) {
        throw new UsageLimitExceededException(
            "the run reached its limit of " + maxToolCalls + " tool calls");
      }
      usage = usage.plus(new Usage(0, 0, 0, 1));
    }
    emit(new AgentEvent.ToolCallStarted(call.id(), call.toolName(), call.arguments()));
    Tool tool = tools.get(call.toolName());
    if (tool == null) {
      return retry(
          call,
          "There is no tool named `"
              + call.toolName()
              + "`. The tools are: "
              + String.join(", ", tools.keySet().stream().sorted().toList())
              + ".",
          3);
    }
    try {
      for (Capability capability : capabilities) {
        capability.beforeToolCall(this, call);
      }
      String output = tool.call(new Context(call), call.arguments());
      output = output == null ? "" : output;
      for (Capability capability : capabilities) {
        output = capability.afterToolCall(this, call, output);
      }
      retries.remove(call.toolName()); // the budget is for retries in a row, as in the reference
      finish(call, output, AgentEvent.Outcome.RETURNED);
      return new RequestPart.ToolReturn(call.id(), call.toolName(), output, false);
    } catch (ModelRetryException e) {
      SandboxTelemetry.recordFailure(span, e);
      return retry(call, e.getMessage(), tool.maxRetries());
    } catch (WorkspaceUnavailableException | CancellationException | AgentException e) {
      // the machine is gone, the run was cancelled, or the agent itself is misconfigured (no
      // workspace to use): nothing the model could fix by reading an error result
      throw e;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw cancelled();
    } catch (Exception e) {
      if (Thread.currentThread().isInterrupted()) {
        throw cancelled();
      }
      SandboxTelemetry.recordFailure(span, e); // the model gets an error result; the span says so
      String message = "Error: " + describe(e);
      finish(call, message, AgentEvent.Outcome.FAILED);
      return new RequestPart.ToolReturn(call.id(), call.toolName(), message, true);
    } finally {
      session.announceIfCreated();
    }
  }

  private RequestPart retry(ResponsePart.ToolCall call, String message, int maxRetries) {
    int count = retries.merge(call.toolName(), 1, Integer::sum);
    if (count > maxRetries) {
      throw new UnexpectedModelBehaviorException(
          "tool `"
              + call.toolName()
              + "` exceeded its "
              + maxRetries
              + " retries in a row; the last problem: "
              + message);
    }
    finish(call, message, AgentEvent.Outcome.RETRY);
    return new RequestPart.RetryPrompt(call.id(), call.toolName(), message);
  }

  private void finish(ResponsePart.ToolCall call, String result, AgentEvent.Outcome outcome) {
    session.announceIfCreated(); // a workspace the call created is reported before its result
    emit(new AgentEvent.ToolCallFinished(call.id(), call.toolName(), result, outcome));
  }

  private static String describe(Exception e) {
    String message = e.getMessage();
    return message == null || message.isBlank() ? e.getClass().getSimpleName() : message;
  }

  private void checkCancelled() {
    if (Thread.currentThread().isInterrupted()) {
      throw cancelled();
    }
  }

  private static CancellationException cancelled() {
    return new CancellationException("the run was cancelled");
  }

  private synchronized int append(Message message) {
    newMessages.add(message);
    if (message instanceof ResponseMessage response) {
      usage = usage.plus(response.usage());
    }
    return newMessages.size() - 1;
  }

  private synchronized void replace(int index, Message message) {
    newMessages.set(index, message);
  }

  private synchronized RunResult result(String output) {
    return new RunResult(output, messages(), newMessages, usage, session.ref().orElse(null));
  }

  private void emit(AgentEvent event) {
    // one at a time: a command's stdout and stderr are read on two threads
    synchronized (listener) {
      emitLocked(event);
    }
  }

  private void emitLocked(AgentEvent event) {
    try {
      listener.accept(event);
    } catch (RuntimeException e) {
      LOG.log(
          Level.WARNING,
          "an agent event listener failed on " + event.getClass().getSimpleName(),
          e);
    }
  }

  // One step at a time, for AgentSteps: an engine that drives the loop itself (a durable workflow)
  // and keeps the run's state between steps. Each step is the same code the loop runs.

  /**
   * The loop's start (beforeRun hooks, then instructions), and the workspace opened now if the run
   * has one: {@code chosen} by its config or history, or from a capability that provides them.
   */
  AgentSteps.Start startStep(boolean chosen) {
    boolean openWorkspace =
        chosen || capabilities.stream().anyMatch(c -> c.workspaceProvider().isPresent());
    for (Capability capability : capabilities) {
      capability.beforeRun(this);
      session.announceIfCreated();
    }
    String all = instructions();
    WorkspaceRef ref = null;
    if (openWorkspace) {
      ref = session.workspace().open(); // creates, or attaches (a machine gone fails here)
      session.announceIfCreated();
    }
    return new AgentSteps.Start(all, ref, maxRequests, maxToolCalls);
  }

  /** One model request on the messages so far, stamped as the loop stamps it. */
  ResponseMessage modelStep(String instructions) {
    checkCancelled();
    ResponseMessage response =
        model.request(
            new ModelRequest(messages(), instructions, definitions, settings),
            delta -> emit(new AgentEvent.TextDelta(delta)));
    response =
        response.withUsage(
            new Usage(1, response.usage().inputTokens(), response.usage().outputTokens(), 0),
            response.modelName().isEmpty() ? model.name() : response.modelName());
    response = response.withWorkspace(session.ref().orElse(null));
    emit(new AgentEvent.ModelResponded(response));
    return response;
  }

  /**
   * One tool call, with the loop's count of retries in a row carried in and out (a retry over a
   * tool's budget throws as in the loop).
   */
  RequestPart toolStep(ResponsePart.ToolCall call, Map<String, Integer> retriesInARow) {
    retries.putAll(retriesInARow);
    return callTool(call);
  }

  /** The count of retries in a row by tool, after {@link #toolStep}. */
  Map<String, Integer> retriesInARow() {
    return Map.copyOf(retries);
  }

  private final class Context implements ToolContext {
    private final ResponsePart.ToolCall call;

    Context(ResponsePart.ToolCall call) {
      this.call = call;
    }

    @Override
    public RunContext run() {
      return AgentRun.this;
    }

    @Override
    public String toolCallId() {
      return call.id();
    }

    @Override
    public String toolName() {
      return call.toolName();
    }

    @Override
    public void emitOutput(String stream, String text) {
      emit(new AgentEvent.ToolOutput(call.id(), stream, text));
    }
  }
}
