package dev.sandbox4j.agent;

import dev.sandbox4j.agent.models.Models;
import java.util.function.Consumer;

/**
 * A language model the agent talks to: a history, instructions and tool definitions in; text, tool
 * calls and usage out.
 *
 * <p>Implementations are thread-safe: one model serves concurrent runs. A model does not retry on
 * its own beyond what its SDK does, and never calls tools: it only reports the calls the model asks
 * for.
 */
public interface Model {

  /**
   * The model named by {@code name}: {@code anthropic:<model>} or {@code openai:<model>} (keys and
   * base URLs from the provider's usual environment variables), or {@code test} for a {@link
   * dev.sandbox4j.agent.models.TestModel}.
   *
   * @throws IllegalArgumentException naming the problem: unknown provider, missing SDK, no key
   */
  static Model of(String name) {
    return Models.of(name);
  }

  /** The name this model goes by, such as {@code anthropic:claude-sonnet-4-5}. */
  String name();

  /**
   * Asks the model for its next response.
   *
   * @param request the conversation so far, instructions and tools
   * @param onTextDelta receives text as the model writes it, in order, when the model streams; the
   *     returned response holds all of it either way
   * @throws ModelException if the provider fails or answers something this adapter cannot read
   */
  ResponseMessage request(ModelRequest request, Consumer<String> onTextDelta);
}
