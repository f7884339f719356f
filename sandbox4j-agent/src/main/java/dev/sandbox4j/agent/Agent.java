package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.SandboxTelemetry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.context.Context;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * An AI agent: a model, instructions, and capabilities whose tools act in a workspace.
 *
 * {@snippet :
 * Agent agent = Agent.builder()
 *     .model("anthropic:claude-sonnet-4-5")
 *     .capability(WorkspaceCapability.of(new LocalSandbox()))
 *     .capability(Coder.create())
 *     .build();
 * RunResult first = agent.runSync("Write a script that prints the date, and run it.");
 * RunResult next = agent.runSync("Now make it print UTC.", RunConfig.continuing(first.allMessages()));
 * }
 *
 * <p>A run asks the model, carries out the tool calls it makes (one after another, in its order),
 * sends the results back, and repeats until the model answers without calling a tool. An agent is
 * immutable and thread-safe: concurrent runs share nothing but the model and the capabilities. The
 * agent never destroys a workspace.
 *
 * <p>Telemetry: a run is an OpenTelemetry span {@code invoke_agent}, a child of the span current
 * where the run was started, with the workspace's provider and id; each model request a span {@code
 * chat MODEL} and each tool call a span {@code execute_tool NAME} under it, following the GenAI
 * semantic conventions; the workspace's commands and file operations are spans under the tool call
 * ({@link dev.sandbox4j.workspace.Workspace}). Through the global OpenTelemetry unless {@link
 * Builder#openTelemetry} gives one; a no-op until an SDK or the Java agent is installed. Prompts,
 * messages, tool arguments and results are never recorded.
 */
public final class Agent {

  private final Model model;
  private final String instructions;
  private final List<Capability> capabilities;
  private final Map<String, Tool> tools;
  private final ModelSettings settings;
  private final int maxRequests;
  private final int maxToolCalls;
  private final SandboxTelemetry telemetry;
  private final OpenTelemetry openTelemetry; // null: the global one

  private Agent(Builder builder) {
    this.openTelemetry = builder.openTelemetry;
    this.telemetry =
        openTelemetry == null ? SandboxTelemetry.global() : SandboxTelemetry.of(openTelemetry);
    this.model = Objects.requireNonNull(builder.model, "an agent needs a model");
    this.instructions = builder.instructions;
    this.capabilities = List.copyOf(builder.capabilities);
    this.settings = builder.settings;
    this.maxRequests = builder.maxRequests;
    this.maxToolCalls = builder.maxToolCalls;
    Map<String, Tool> byName = new LinkedHashMap<>();
    List<Tool> all = new ArrayList<>(builder.tools);
    for (Capability capability : capabilities) {
      all.addAll(capability.tools());
    }
    for (Tool tool : all) {
      String name = tool.definition().name();
      if (byName.putIfAbsent(name, tool) != null) {
        throw new IllegalArgumentException(
            "two tools are named '" + name + "': each tool an agent has needs its own name");
      }
    }
    this.tools = Map.copyOf(byName);
    for (Capability capability : capabilities) {
      if (capability instanceof WorkspaceCapability<?> workspace) {
        workspace.warnIfNoWorkspaceTools(tools.keySet());
      }
    }
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The agent's model. */
  public Model model() {
    return model;
  }

  /** The tools the model may call, by name. */
  public Map<String, Tool> tools() {
    return tools;
  }

  /** Runs {@code prompt} on a new virtual thread; cancelling the future kills a running command. */
  public CompletableFuture<RunResult> run(String prompt) {
    return run(prompt, RunConfig.defaults());
  }

  /**
   * Runs {@code prompt} on a new virtual thread. Cancelling the returned future interrupts the run:
   * the running command (and every process it started) is killed, and the run fails.
   */
  public CompletableFuture<RunResult> run(String prompt, RunConfig config) {
    AgentRun run = newRun(prompt, config);
    return RunFuture.start(run::execute);
  }

  /** Runs {@code prompt} on the calling thread; interrupting it cancels the run. */
  public RunResult runSync(String prompt) {
    return runSync(prompt, RunConfig.defaults());
  }

  /** Runs {@code prompt} on the calling thread; interrupting it cancels the run. */
  public RunResult runSync(String prompt, RunConfig config) {
    return newRun(prompt, config).execute();
  }

  /**
   * Runs {@code prompt} on the calling thread, sending every {@link AgentEvent} to {@code listener}
   * as it happens (in addition to a listener the config has).
   */
  public RunResult runStreaming(String prompt, RunConfig config, Consumer<AgentEvent> listener) {
    Consumer<AgentEvent> both = config.onEvent().andThen(listener);
    return newRun(prompt, config, both).execute();
  }

  private AgentRun newRun(String prompt, RunConfig config) {
    return newRun(prompt, config, config.onEvent());
  }

  // package-private for AgentSteps, which takes a run's steps one at a time
  AgentRun newRun(String prompt, RunConfig config, Consumer<AgentEvent> listener) {
    Objects.requireNonNull(prompt, "prompt");
    int requests = config.maxRequests() != null ? config.maxRequests() : maxRequests;
    int calls = config.maxToolCalls() != null ? config.maxToolCalls() : maxToolCalls;
    return new AgentRun(
        model,
        instructions,
        capabilities,
        tools,
        settings,
        requests,
        calls,
        prompt,
        config,
        listener,
        telemetry,
        openTelemetry,
        Context.current());
  }

  static int positive(String what, int value) {
    if (value <= 0) {
      throw new IllegalArgumentException(what + " must be positive, was " + value);
    }
    return value;
  }

  /** Options of an agent. The model is required; everything else has a default. */
  public static final class Builder {
    private Model model;
    private String instructions = "";
    private final List<Capability> capabilities = new ArrayList<>();
    private final List<Tool> tools = new ArrayList<>();
    private ModelSettings settings = ModelSettings.DEFAULTS;
    private int maxRequests = 50;
    private int maxToolCalls = 200;
    private OpenTelemetry openTelemetry;

    private Builder() {}

    /**
     * Traces and measures runs, and their workspaces' operations, through {@code openTelemetry}
     * rather than the global OpenTelemetry (which the Java agent or {@code
     * buildAndRegisterGlobal()} sets, and which is the default).
     */
    public Builder openTelemetry(OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry, "openTelemetry");
      return this;
    }

    public Builder model(Model model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** The model by name, as {@link Model#of(String)} reads it. */
    public Builder model(String name) {
      return model(Model.of(name));
    }

    /** Instructions every run starts with; capabilities may add their own after them. */
    public Builder instructions(String instructions) {
      this.instructions = Objects.requireNonNull(instructions, "instructions");
      return this;
    }

    public Builder capability(Capability capability) {
      capabilities.add(Objects.requireNonNull(capability, "capability"));
      return this;
    }

    public Builder capabilities(List<? extends Capability> list) {
      list.forEach(this::capability);
      return this;
    }

    /** A tool of the agent's own, besides its capabilities' tools. */
    public Builder tool(Tool tool) {
      tools.add(Objects.requireNonNull(tool, "tool"));
      return this;
    }

    public Builder settings(ModelSettings settings) {
      this.settings = Objects.requireNonNull(settings, "settings");
      return this;
    }

    /** Most model requests one run may make (50 by default); one more fails the run. */
    public Builder maxRequests(int limit) {
      this.maxRequests = positive("maxRequests", limit);
      return this;
    }

    /** Most tool calls one run may make (200 by default); one more fails the run. */
    public Builder maxToolCalls(int limit) {
      this.maxToolCalls = positive("maxToolCalls", limit);
      return this;
    }

    /**
     * @throws IllegalArgumentException if two tools share a name
     */
    public Agent build() {
      return new Agent(this);
    }
  }
}
