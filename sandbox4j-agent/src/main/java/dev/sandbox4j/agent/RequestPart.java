package dev.sandbox4j.agent;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import java.util.Objects;

/** One part of a {@link RequestMessage}. */
@JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
@JsonSubTypes({
  @JsonSubTypes.Type(value = RequestPart.UserPrompt.class, name = "user-prompt"),
  @JsonSubTypes.Type(value = RequestPart.ToolReturn.class, name = "tool-return"),
  @JsonSubTypes.Type(value = RequestPart.RetryPrompt.class, name = "retry-prompt")
})
public sealed interface RequestPart {

  /** Text from the user. */
  record UserPrompt(String text) implements RequestPart {
    public UserPrompt {
      Objects.requireNonNull(text, "text");
    }
  }

  /**
   * The result of a tool call.
   *
   * @param toolCallId the id of the {@link ResponsePart.ToolCall} this answers
   * @param toolName the tool's name
   * @param content what the tool returned, as the model sees it
   * @param error whether the tool failed (the content then says how)
   */
  record ToolReturn(String toolCallId, String toolName, String content, boolean error)
      implements RequestPart {
    public ToolReturn {
      Objects.requireNonNull(toolCallId, "toolCallId");
      Objects.requireNonNull(toolName, "toolName");
      Objects.requireNonNull(content, "content");
    }
  }

  /**
   * A request to the model to try a tool call again: its arguments did not fit the tool's schema,
   * it named an unknown tool, or the tool asked for a retry ({@link ModelRetryException}).
   *
   * @param toolCallId the call being answered
   * @param toolName the tool the model named
   * @param content what was wrong and how to fix it
   */
  record RetryPrompt(String toolCallId, String toolName, String content) implements RequestPart {
    public RetryPrompt {
      Objects.requireNonNull(toolCallId, "toolCallId");
      Objects.requireNonNull(toolName, "toolName");
      Objects.requireNonNull(content, "content");
    }
  }
}
