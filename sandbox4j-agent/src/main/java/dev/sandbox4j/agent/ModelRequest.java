package dev.sandbox4j.agent;

import java.util.List;
import java.util.Objects;

/**
 * Everything a model is asked with in one turn.
 *
 * @param messages the conversation so far, oldest first; the last is a {@link RequestMessage}
 * @param instructions the system instructions for this run (may be empty)
 * @param tools the tools the model may call
 * @param settings sampling settings
 */
public record ModelRequest(
    List<Message> messages,
    String instructions,
    List<ToolDefinition> tools,
    ModelSettings settings) {

  public ModelRequest {
    messages = List.copyOf(messages);
    instructions = instructions == null ? "" : instructions;
    tools = List.copyOf(tools);
    Objects.requireNonNull(settings, "settings");
  }
}
