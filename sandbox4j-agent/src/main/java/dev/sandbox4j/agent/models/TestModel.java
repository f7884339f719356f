package dev.sandbox4j.agent.models;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.ToolDefinition;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * A model for users' tests that needs no provider: its first response calls every tool once with
 * arguments valid for the tool's schema (required arguments only: {@code "a"} for strings, 0 for
 * numbers, {@code false}, empty arrays, an enum's first value); then it answers with a JSON object
 * of each tool's result, by tool name.
 *
 * <p>It shows that an agent's tools are wired up and accept schema-valid arguments; it is not a
 * model of how a real one behaves. A retry prompt (arguments the tool refused) is answered like a
 * tool result.
 */
public final class TestModel implements Model {

  private static final ObjectMapper JSON = new ObjectMapper();

  @Override
  public String name() {
    return "test";
  }

  @Override
  public ResponseMessage request(ModelRequest request, Consumer<String> onTextDelta) {
    List<Message> messages = request.messages();
    boolean toolsCalled =
        messages.stream().anyMatch(m -> m instanceof ResponseMessage r && !r.toolCalls().isEmpty());
    if (!toolsCalled && !request.tools().isEmpty()) {
      List<ResponsePart> calls = new ArrayList<>();
      int n = 0;
      for (ToolDefinition tool : request.tools()) {
        calls.add(
            new ResponsePart.ToolCall(
                "test-call-" + (++n), tool.name(), toJson(sample(tool.parametersSchema()))));
      }
      return ResponseMessage.of(calls);
    }
    Map<String, String> results = new LinkedHashMap<>();
    for (Message message : messages) {
      if (message instanceof RequestMessage r) {
        for (RequestPart part : r.parts()) {
          switch (part) {
            case RequestPart.ToolReturn t -> results.put(t.toolName(), t.content());
            case RequestPart.RetryPrompt p -> results.put(p.toolName(), p.content());
            case RequestPart.UserPrompt u -> {}
          }
        }
      }
    }
    String text = results.isEmpty() ? "success (no tool calls)" : toJson(results);
    onTextDelta.accept(text);
    return ResponseMessage.text(text);
  }

  @SuppressWarnings("unchecked")
  static Object sample(Map<String, Object> schema) {
    Object type = schema.get("type");
    if (schema.get("enum") instanceof List<?> values && !values.isEmpty()) {
      return values.getFirst();
    }
    if (!(type instanceof String t)) {
      return "a";
    }
    return switch (t) {
      case "object" -> {
        Map<String, Object> properties =
            (Map<String, Object>) schema.getOrDefault("properties", Map.of());
        List<String> required = (List<String>) schema.getOrDefault("required", List.of());
        Map<String, Object> value = new LinkedHashMap<>();
        for (String name : required) {
          Object property = properties.get(name);
          value.put(name, property instanceof Map<?, ?> p ? sample((Map<String, Object>) p) : "a");
        }
        yield value;
      }
      case "array" -> List.of();
      case "integer", "number" -> 0;
      case "boolean" -> false;
      default -> "a";
    };
  }

  private static String toJson(Object value) {
    try {
      return JSON.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }
}
