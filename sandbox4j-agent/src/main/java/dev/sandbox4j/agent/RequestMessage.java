package dev.sandbox4j.agent;

import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * What the agent sends the model in one turn: the user's prompt, or the results of the tool calls
 * the model asked for.
 *
 * @param parts the parts, in order; never empty
 * @param timestamp when the agent made it
 */
public record RequestMessage(List<RequestPart> parts, Instant timestamp) implements Message {

  public RequestMessage {
    parts = List.copyOf(parts);
    if (parts.isEmpty()) {
      throw new IllegalArgumentException("a request message needs at least one part");
    }
    Objects.requireNonNull(timestamp, "timestamp");
  }

  /** A request holding one user prompt, timestamped now. */
  public static RequestMessage userPrompt(String text) {
    return new RequestMessage(List.of(new RequestPart.UserPrompt(text)), Instant.now());
  }
}
