package dev.sandbox4j.agent.models;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.ModelSettings;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ToolDefinition;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.List;
import java.util.Map;

/** The two-turn conversation the recordings hold (see {@code recordings/README.md}). */
final class WeatherExchange {

  static final String INSTRUCTIONS = "You are a concise weather assistant.";
  static final String PROMPT = "What's the weather in Paris right now?";
  static final String TOOL_RESULT = "18 °C, light rain";
  static final String ANSWER = "It's 18 °C with light rain in Paris right now.";
  static final ModelSettings SETTINGS = new ModelSettings(1024, 0.2);

  static final Map<String, Object> SCHEMA =
      Map.of(
          "type",
          "object",
          "properties",
          Map.of(
              "city", Map.of("type", "string", "description", "The city"),
              "unit", Map.of("type", "string", "enum", List.of("celsius", "fahrenheit"))),
          "required",
          List.of("city", "unit"),
          "additionalProperties",
          false);

  static final ToolDefinition TOOL =
      new ToolDefinition("get_weather", "The current weather in a city.", SCHEMA);

  private static final ObjectMapper JSON = new ObjectMapper();

  private WeatherExchange() {}

  static ModelRequest first() {
    return new ModelRequest(
        List.of(RequestMessage.userPrompt(PROMPT)), INSTRUCTIONS, List.of(TOOL), SETTINGS);
  }

  /** The request after {@code first} called the tool, holding the tool's result. */
  static ModelRequest second(ResponseMessage first) {
    String callId = first.toolCalls().getFirst().id();
    List<Message> history =
        List.of(
            RequestMessage.userPrompt(PROMPT),
            first,
            new RequestMessage(
                List.of(new RequestPart.ToolReturn(callId, "get_weather", TOOL_RESULT, false)),
                Instant.now()));
    return new ModelRequest(history, INSTRUCTIONS, List.of(TOOL), SETTINGS);
  }

  static JsonNode json(String text) {
    try {
      return JSON.readTree(text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static JsonNode json(Object value) {
    return JSON.valueToTree(value);
  }
}
