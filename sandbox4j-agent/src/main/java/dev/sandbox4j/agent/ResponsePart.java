package dev.sandbox4j.agent;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import java.util.Objects;

/** One part of a {@link ResponseMessage}. */
@JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
@JsonSubTypes({
  @JsonSubTypes.Type(value = ResponsePart.Text.class, name = "text"),
  @JsonSubTypes.Type(value = ResponsePart.ToolCall.class, name = "tool-call")
})
public sealed interface ResponsePart {

  /** Text the model wrote. */
  record Text(String text) implements ResponsePart {
    public Text {
      Objects.requireNonNull(text, "text");
    }
  }

  /**
   * A tool the model asks the agent to call.
   *
   * @param id the model's id for this call, echoed in the {@link RequestPart.ToolReturn}
   * @param toolName the tool's name
   * @param arguments the arguments as a JSON object, as the model wrote them (not yet validated)
   */
  record ToolCall(String id, String toolName, String arguments) implements ResponsePart {
    public ToolCall {
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(toolName, "toolName");
      arguments = arguments == null || arguments.isBlank() ? "{}" : arguments;
    }
  }
}
