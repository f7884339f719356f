package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.Workspace;

/** What a tool call can reach: its run, the run's workspace, and the run's event stream. */
public interface ToolContext {

  /** The run this call belongs to. */
  RunContext run();

  /** The run's workspace, created or attached on first use (see {@link RunContext#workspace()}). */
  default Workspace workspace() {
    return run().workspace();
  }

  /** The model's id for this call. */
  String toolCallId();

  /** The tool's name. */
  String toolName();

  /**
   * Sends output the tool produces while it runs (a command's stdout or stderr) to the run's event
   * listener, as {@link AgentEvent.ToolOutput}; does nothing when nobody listens.
   *
   * @param stream {@code stdout} or {@code stderr}
   */
  void emitOutput(String stream, String text);
}
