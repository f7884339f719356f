package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.WorkspaceProvider;
import java.util.List;
import java.util.Optional;

/**
 * A bundle an agent is built from: tools, instructions, hooks into the run, and optionally a place
 * workspaces come from. {@code Shell}, {@code FileSystem}, {@code Coder} and {@code RepoContext}
 * are capabilities, and so is {@link WorkspaceCapability}.
 *
 * <p>Hooks run in the order the capabilities were given to the agent. Every method has a default
 * that does nothing, so a capability overrides only what it needs. Implementations are used by
 * concurrent runs and must be thread-safe.
 */
public interface Capability {

  /** The tools this capability gives the model. */
  default List<Tool> tools() {
    return List.of();
  }

  /**
   * Instructions this capability adds for a run, read once at run start after {@link #beforeRun};
   * empty for none. May use the workspace (which creates it).
   */
  default String instructions(RunContext run) {
    return "";
  }

  /** Where new workspaces come from and refs are attached, if this capability provides them. */
  default Optional<WorkspaceProvider> workspaceProvider() {
    return Optional.empty();
  }

  /** Called when a run starts, before the first model request. */
  default void beforeRun(RunContext run) {}

  /**
   * Called when a run has succeeded, or an {@link #onRunError} hook recovered it with a result
   * (then with that result). Not called when the run fails.
   */
  default void afterRun(RunContext run, RunResult result) {}

  /**
   * Called when a run fails: clean up (destroy the sandbox of a failed run, say) and rethrow — the
   * default — or recover by returning a result, which the run then returns. A rethrown (or new)
   * exception goes to the next capability's hook, and the last one's leaves the run.
   */
  default RunResult onRunError(RunContext run, RuntimeException error) {
    throw error;
  }

  /** Called before each tool call. Throwing fails the call, with the exception as its result. */
  default void beforeToolCall(RunContext run, ResponsePart.ToolCall call) {}

  /**
   * Called after each tool call that returned; may replace what the model reads (to cap its size,
   * say). The calls chain: each capability gets the previous one's output.
   */
  default String afterToolCall(RunContext run, ResponsePart.ToolCall call, String output) {
    return output;
  }
}
