package dev.sandbox4j.agent.models;

import static dev.sandbox4j.agent.models.WeatherExchange.ANSWER;
import static dev.sandbox4j.agent.models.WeatherExchange.INSTRUCTIONS;
import static dev.sandbox4j.agent.models.WeatherExchange.PROMPT;
import static dev.sandbox4j.agent.models.WeatherExchange.SCHEMA;
import static dev.sandbox4j.agent.models.WeatherExchange.json;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.agent.ModelException;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.ModelSettings;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.Usage;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@link OpenAIModel} through the real SDK against recorded Chat Completions responses. */
class OpenAIModelTest {

  private static final String KEY = "sk-test-dummy-key-1234";
  private static final String CALL_ID = "call_Wb5Hq2rJm3kXyT8uVn1cPd0e";

  private ReplayServer server;

  @BeforeEach
  void startServer() {
    server = ReplayServer.start();
  }

  @AfterEach
  void stopServer() {
    server.close();
  }

  private OpenAIModel model(boolean stream) {
    return OpenAIModel.builder()
        .model("gpt-5")
        .apiKey(KEY)
        .baseUrl(server.baseUrl() + "/v1")
        .stream(stream)
        .build();
  }

  @Test
  void streamsTheToolUseExchange() {
    server.enqueue("openai/tool-use-1-streamed.http");
    server.enqueue("openai/tool-use-2-streamed.http");
    OpenAIModel model = model(true);

    List<String> deltas = new ArrayList<>();
    ResponseMessage first = model.request(WeatherExchange.first(), deltas::add);
    assertThat(deltas).isEmpty();
    assertFirstTurn(first);

    ResponseMessage second = model.request(WeatherExchange.second(first), deltas::add);
    assertThat(deltas).containsExactly("It's 18 °C", " with light rain", " in Paris right now.");
    assertSecondTurn(second);

    List<ReplayServer.Request> sent = server.requests();
    assertThat(sent).hasSize(2);
    assertSentFirstTurn(sent.get(0));
    assertThat(sent.get(0).json().path("stream").asBoolean()).isTrue();
    assertThat(sent.get(0).json().path("stream_options"))
        .isEqualTo(json("{\"include_usage\": true}"));
    assertSentSecondTurn(sent.get(1));
  }

  @Test
  void requestsTheToolUseExchangeWithoutStreaming() {
    server.enqueue("openai/tool-use-1.http");
    server.enqueue("openai/tool-use-2.http");
    OpenAIModel model = model(false);

    List<String> deltas = new ArrayList<>();
    ResponseMessage first = model.request(WeatherExchange.first(), deltas::add);
    ResponseMessage second = model.request(WeatherExchange.second(first), deltas::add);

    assertFirstTurn(first);
    assertSecondTurn(second);
    assertThat(deltas).containsExactly(ANSWER);
    List<ReplayServer.Request> sent = server.requests();
    assertSentFirstTurn(sent.get(0));
    assertThat(sent.get(0).json().has("stream")).isFalse();
    assertThat(sent.get(0).json().has("stream_options")).isFalse();
    assertSentSecondTurn(sent.get(1));
  }

  private static void assertFirstTurn(ResponseMessage response) {
    assertThat(response.text()).isEmpty();
    assertThat(response.toolCalls()).hasSize(1);
    ResponsePart.ToolCall call = response.toolCalls().getFirst();
    assertThat(call.id()).isEqualTo(CALL_ID);
    assertThat(call.toolName()).isEqualTo("get_weather");
    assertThat(call.arguments()).isEqualTo("{\"city\":\"Paris\",\"unit\":\"celsius\"}");
    assertThat(response.usage()).isEqualTo(Usage.ofTokens(96, 153));
    assertThat(response.modelName()).isEqualTo("gpt-5-2025-08-07");
  }

  private static void assertSecondTurn(ResponseMessage response) {
    assertThat(response.parts()).containsExactly(new ResponsePart.Text(ANSWER));
    assertThat(response.usage()).isEqualTo(Usage.ofTokens(142, 85));
    assertThat(response.modelName()).isEqualTo("gpt-5-2025-08-07");
  }

  private static void assertSentFirstTurn(ReplayServer.Request request) {
    assertThat(request.method()).isEqualTo("POST");
    assertThat(request.path()).isEqualTo("/v1/chat/completions");
    assertThat(request.headers()).containsEntry("authorization", "Bearer " + KEY);
    JsonNode body = request.json();
    assertThat(body.path("model").asText()).isEqualTo("gpt-5");
    assertThat(body.path("max_completion_tokens").asInt()).isEqualTo(1024);
    assertThat(body.has("max_tokens")).isFalse();
    assertThat(body.path("temperature").asDouble()).isEqualTo(0.2);
    assertThat(body.path("tools"))
        .isEqualTo(
            json(
                List.of(
                    Map.of(
                        "type",
                        "function",
                        "function",
                        Map.of(
                            "name", "get_weather",
                            "description", "The current weather in a city.",
                            "parameters", SCHEMA)))));
    assertThat(body.path("messages"))
        .isEqualTo(
            json(
                """
                [
                  {"role": "system", "content": "%s"},
                  {"role": "user", "content": "%s"}
                ]
                """
                    .formatted(INSTRUCTIONS, PROMPT)));
  }

  private static void assertSentSecondTurn(ReplayServer.Request request) {
    assertThat(request.json().path("messages"))
        .isEqualTo(
            json(
                """
                [
                  {"role": "system", "content": "%s"},
                  {"role": "user", "content": "%s"},
                  {"role": "assistant", "tool_calls": [
                    {"id": "%s", "type": "function",
                     "function": {"name": "get_weather",
                                  "arguments": "{\\"city\\":\\"Paris\\",\\"unit\\":\\"celsius\\"}"}}
                  ]},
                  {"role": "tool", "tool_call_id": "%s", "content": "18 °C, light rain"}
                ]
                """
                    .formatted(INSTRUCTIONS, PROMPT, CALL_ID, CALL_ID)));
  }

  @Test
  void sendsToolResultsAndRetryPromptsAsToolMessagesAndTextWithCalls() {
    server.enqueue("openai/tool-use-2.http");
    ResponseMessage calls =
        ResponseMessage.of(
            List.of(
                new ResponsePart.Text("Checking both."),
                new ResponsePart.ToolCall("call_a", "get_weather", "{\"city\":\"Oslo\"}"),
                new ResponsePart.ToolCall("call_b", "get_weather", "{not json")));
    ModelRequest request =
        new ModelRequest(
            List.of(
                RequestMessage.userPrompt("Oslo and Bergen?"),
                calls,
                new RequestMessage(
                    List.of(
                        new RequestPart.ToolReturn(
                            "call_a", "get_weather", "Error: service down", true),
                        new RequestPart.RetryPrompt(
                            "call_b", "get_weather", "The arguments are not valid JSON.")),
                    Instant.now())),
            "",
            List.of(),
            new ModelSettings(256, null));

    model(false).request(request, delta -> {});

    JsonNode body = server.requests().getFirst().json();
    assertThat(body.has("temperature")).isFalse();
    assertThat(body.has("tools")).isFalse();
    assertThat(body.path("max_completion_tokens").asInt()).isEqualTo(256);
    assertThat(body.path("messages"))
        .isEqualTo(
            json(
                """
                [
                  {"role": "user", "content": "Oslo and Bergen?"},
                  {"role": "assistant", "content": "Checking both.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\\"city\\":\\"Oslo\\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{not json"}}
                  ]},
                  {"role": "tool", "tool_call_id": "call_a", "content": "Error: service down"},
                  {"role": "tool", "tool_call_id": "call_b",
                   "content": "The arguments are not valid JSON."}
                ]
                """));
  }

  @Test
  void anAuthenticationErrorNamesTheStatusAndTheApiMessageButNoKey() {
    server.enqueue("openai/error-401.http");

    assertThatThrownBy(() -> model(true).request(WeatherExchange.first(), delta -> {}))
        .isInstanceOf(ModelException.class)
        .hasMessage(
            "openai: HTTP 401 (invalid_api_key): Incorrect API key provided: sk-***. You can find"
                + " your API key at https://platform.openai.com/account/api-keys."
                + " [request req_3d5f7a9c1e2b4d6f8a0c2e4b6d8f0a1c]")
        .message()
        .doesNotContain("sk-test", "1234");
    assertThat(server.requests()).hasSize(1);
  }

  @Test
  void aRateLimitIsRetriedByTheSdkThenNamesTheStatusAndTheApiMessage() {
    for (int i = 0; i < 3; i++) {
      server.enqueue("openai/error-429.http");
    }

    assertThatThrownBy(() -> model(true).request(WeatherExchange.first(), delta -> {}))
        .isInstanceOf(ModelException.class)
        .hasMessageStartingWith(
            "openai: HTTP 429 (rate_limit_exceeded): Rate limit reached for gpt-5 in organization")
        .hasMessageEndingWith("[request req_9b1d3f5a7c2e4b6d8f0a1c3e5b7d9f2a]");
    // one request and the SDK's two retries, each after the 20 ms the API asked for
    assertThat(server.requests()).hasSize(3);
  }

  @Test
  void withoutAKeyInTheEnvironmentTheVariableIsNamed() {
    assertThatThrownBy(() -> OpenAIModel.fromEnvironment("gpt-5", name -> null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("OPENAI_API_KEY");
  }

  @Test
  void isNamedAfterItsProviderAndModel() {
    assertThat(model(true).name()).isEqualTo("openai:gpt-5");
  }
}
