package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/** Per-run options: history to continue, the workspace to use, an event listener, limits. */
public final class RunConfig {

  /** Which workspace a run uses, when the caller says. */
  sealed interface WorkspaceChoice {
    record Fresh() implements WorkspaceChoice {}

    record Ref(WorkspaceRef ref) implements WorkspaceChoice {}

    record Backend(WorkspaceBackend backend) implements WorkspaceChoice {}
  }

  private static final RunConfig DEFAULTS = builder().build();

  private final List<Message> messageHistory;
  private final WorkspaceChoice workspace;
  private final Consumer<AgentEvent> onEvent;
  private final Integer maxRequests;
  private final Integer maxToolCalls;

  private RunConfig(Builder builder) {
    this.messageHistory = List.copyOf(builder.messageHistory);
    this.workspace = builder.workspace;
    this.onEvent = builder.onEvent;
    this.maxRequests = builder.maxRequests;
    this.maxToolCalls = builder.maxToolCalls;
  }

  public static RunConfig defaults() {
    return DEFAULTS;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A run continuing {@code history}. */
  public static RunConfig continuing(List<? extends Message> history) {
    return builder().messageHistory(history).build();
  }

  public List<Message> messageHistory() {
    return messageHistory;
  }

  WorkspaceChoice workspace() {
    return workspace;
  }

  Consumer<AgentEvent> onEvent() {
    return onEvent;
  }

  Integer maxRequests() {
    return maxRequests;
  }

  Integer maxToolCalls() {
    return maxToolCalls;
  }

  public static final class Builder {
    private List<? extends Message> messageHistory = List.of();
    private WorkspaceChoice workspace;
    private Consumer<AgentEvent> onEvent = event -> {};
    private Integer maxRequests;
    private Integer maxToolCalls;

    private Builder() {}

    /**
     * The conversation to continue. Its latest workspace ref is the run's workspace unless {@link
     * #workspace} or {@link #newWorkspace} says otherwise. Pass a history from an untrusted client
     * through {@link Messages#sanitize} first.
     */
    public Builder messageHistory(List<? extends Message> history) {
      this.messageHistory = Objects.requireNonNull(history, "history");
      return this;
    }

    /** Work in the workspace {@code ref} names, attached by the capability of its provider. */
    public Builder workspace(WorkspaceRef ref) {
      this.workspace = new WorkspaceChoice.Ref(Objects.requireNonNull(ref, "ref"));
      return this;
    }

    /** Work in this backend; the agent's workspace capabilities' settings do not apply to it. */
    public Builder workspace(WorkspaceBackend backend) {
      this.workspace = new WorkspaceChoice.Backend(Objects.requireNonNull(backend, "backend"));
      return this;
    }

    /** Start a fresh workspace even if the history names one. */
    public Builder newWorkspace() {
      this.workspace = new WorkspaceChoice.Fresh();
      return this;
    }

    /** Receives the run's events, in order, on the run's thread. */
    public Builder onEvent(Consumer<AgentEvent> listener) {
      this.onEvent = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /** Overrides the agent's limit of model requests for this run. */
    public Builder maxRequests(int limit) {
      this.maxRequests = Agent.positive("maxRequests", limit);
      return this;
    }

    /** Overrides the agent's limit of tool calls for this run. */
    public Builder maxToolCalls(int limit) {
      this.maxToolCalls = Agent.positive("maxToolCalls", limit);
      return this;
    }

    public RunConfig build() {
      return new RunConfig(this);
    }
  }
}
