package dev.sandbox4j.agent;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.BiConsumer;
import java.util.function.BiFunction;
import java.util.function.Consumer;

/**
 * A capability made of hook functions, for code that wants to act at points of a run without
 * writing a capability class:
 *
 * {@snippet :
 * Capability cleanup = Hooks.builder()
 *     .onRunError((run, error) -> {
 *       run.workspaceRef().ifPresent(sandbox::destroy);
 *       throw error;
 *     })
 *     .build();
 * }
 */
public final class Hooks implements Capability {

  private final List<Consumer<RunContext>> beforeRun;
  private final List<BiConsumer<RunContext, RunResult>> afterRun;
  private final List<BiFunction<RunContext, RuntimeException, RunResult>> onRunError;
  private final List<BiConsumer<RunContext, ResponsePart.ToolCall>> beforeToolCall;
  private final List<ToolOutputHook> afterToolCall;

  private Hooks(Builder builder) {
    this.beforeRun = List.copyOf(builder.beforeRun);
    this.afterRun = List.copyOf(builder.afterRun);
    this.onRunError = List.copyOf(builder.onRunError);
    this.beforeToolCall = List.copyOf(builder.beforeToolCall);
    this.afterToolCall = List.copyOf(builder.afterToolCall);
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Replaces a tool call's output, after it returned. */
  @FunctionalInterface
  public interface ToolOutputHook {
    String apply(RunContext run, ResponsePart.ToolCall call, String output);
  }

  @Override
  public void beforeRun(RunContext run) {
    beforeRun.forEach(hook -> hook.accept(run));
  }

  @Override
  public void afterRun(RunContext run, RunResult result) {
    afterRun.forEach(hook -> hook.accept(run, result));
  }

  @Override
  public RunResult onRunError(RunContext run, RuntimeException error) {
    RuntimeException current = error;
    for (BiFunction<RunContext, RuntimeException, RunResult> hook : onRunError) {
      try {
        return Objects.requireNonNull(hook.apply(run, current), "an onRunError hook returned null");
      } catch (RuntimeException next) {
        current = next;
      }
    }
    throw current;
  }

  @Override
  public void beforeToolCall(RunContext run, ResponsePart.ToolCall call) {
    beforeToolCall.forEach(hook -> hook.accept(run, call));
  }

  @Override
  public String afterToolCall(RunContext run, ResponsePart.ToolCall call, String output) {
    String current = output;
    for (ToolOutputHook hook : afterToolCall) {
      current = hook.apply(run, call, current);
    }
    return current;
  }

  /** Collects hooks; each kind may be given several times and runs in the order given. */
  public static final class Builder {
    private final List<Consumer<RunContext>> beforeRun = new ArrayList<>();
    private final List<BiConsumer<RunContext, RunResult>> afterRun = new ArrayList<>();
    private final List<BiFunction<RunContext, RuntimeException, RunResult>> onRunError =
        new ArrayList<>();
    private final List<BiConsumer<RunContext, ResponsePart.ToolCall>> beforeToolCall =
        new ArrayList<>();
    private final List<ToolOutputHook> afterToolCall = new ArrayList<>();

    private Builder() {}

    public Builder beforeRun(Consumer<RunContext> hook) {
      beforeRun.add(Objects.requireNonNull(hook));
      return this;
    }

    /** Runs after a run that succeeded; not after one that failed. */
    public Builder afterRun(BiConsumer<RunContext, RunResult> hook) {
      afterRun.add(Objects.requireNonNull(hook));
      return this;
    }

    /** Runs when a run fails: rethrow to keep it failed, or return a result to recover. */
    public Builder onRunError(BiFunction<RunContext, RuntimeException, RunResult> hook) {
      onRunError.add(Objects.requireNonNull(hook));
      return this;
    }

    public Builder beforeToolCall(BiConsumer<RunContext, ResponsePart.ToolCall> hook) {
      beforeToolCall.add(Objects.requireNonNull(hook));
      return this;
    }

    public Builder afterToolCall(ToolOutputHook hook) {
      afterToolCall.add(Objects.requireNonNull(hook));
      return this;
    }

    public Hooks build() {
      return new Hooks(this);
    }
  }
}
