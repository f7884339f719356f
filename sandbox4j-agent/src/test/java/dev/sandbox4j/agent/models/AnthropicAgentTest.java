package dev.sandbox4j.agent.models;

import static dev.sandbox4j.agent.models.WeatherExchange.ANSWER;
import static dev.sandbox4j.agent.models.WeatherExchange.INSTRUCTIONS;
import static dev.sandbox4j.agent.models.WeatherExchange.PROMPT;
import static dev.sandbox4j.agent.models.WeatherExchange.SETTINGS;
import static dev.sandbox4j.agent.models.WeatherExchange.TOOL_RESULT;
import static dev.sandbox4j.agent.models.WeatherExchange.json;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.AgentEvent;
import dev.sandbox4j.agent.Param;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.Usage;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** An {@link Agent} on the Anthropic adapter, end to end against the recorded streamed exchange. */
class AnthropicAgentTest {

  record WeatherArguments(
      @Param("The city") String city, @Param("celsius or fahrenheit") String unit) {}

  private ReplayServer server;

  @BeforeEach
  void startServer() {
    server = ReplayServer.start();
  }

  @AfterEach
  void stopServer() {
    server.close();
  }

  @Test
  void runsATwoTurnToolUseConversation() {
    server.enqueue("anthropic/tool-use-1-streamed.http");
    server.enqueue("anthropic/tool-use-2-streamed.http");
    List<WeatherArguments> calls = new CopyOnWriteArrayList<>();
    Tool weather =
        Tool.of(
            "get_weather",
            "The current weather in a city.",
            WeatherArguments.class,
            (context, arguments) -> {
              calls.add(arguments);
              return TOOL_RESULT;
            });
    Agent agent =
        Agent.builder()
            .model(
                AnthropicModel.builder()
                    .model("claude-sonnet-4-5")
                    .apiKey("sk-ant-api03-test-only-0000")
                    .baseUrl(server.baseUrl())
                    .build())
            .instructions(INSTRUCTIONS)
            .settings(SETTINGS)
            .tool(weather)
            .build();
    List<String> deltas = new ArrayList<>();

    RunResult result =
        agent.runStreaming(
            PROMPT,
            RunConfig.defaults(),
            event -> {
              if (event instanceof AgentEvent.TextDelta delta) {
                deltas.add(delta.text());
              }
            });

    assertThat(calls).containsExactly(new WeatherArguments("Paris", "celsius"));
    assertThat(result.output()).isEqualTo(ANSWER);
    assertThat(String.join("", deltas))
        .isEqualTo("I'll check the current weather in Paris for you." + ANSWER);
    assertThat(result.usage()).isEqualTo(new Usage(2, 412 + 520, 74 + 19, 1));
    assertThat(result.newMessages()).hasSize(4);
    assertThat(((ResponseMessage) result.newMessages().getLast()).modelName())
        .isEqualTo("claude-sonnet-4-5-20250929");

    List<ReplayServer.Request> sent = server.requests();
    assertThat(sent).hasSize(2);
    JsonNode tool = sent.getFirst().json().path("tools").path(0);
    assertThat(tool.path("name").asText()).isEqualTo("get_weather");
    assertThat(tool.path("input_schema").path("required")).isEqualTo(json("[\"city\", \"unit\"]"));
    assertThat(sent.getLast().json().path("messages").path(2))
        .isEqualTo(
            json(
                """
                {"role": "user", "content": [{"type": "tool_result",
                  "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "%s"}]}
                """
                    .formatted(TOOL_RESULT)));
  }
}
