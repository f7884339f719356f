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
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@link AnthropicModel} through the real SDK against recorded Messages API responses. */
class AnthropicModelTest {

  private static final String KEY = "sk-ant-api03-test-only-0000";
  private static final String CALL_ID = "toolu_01A09q90qw90lq917835lq9";
  private static final String FIRST_TEXT = "I'll check the current weather in Paris for you.";

  private ReplayServer server;

  @BeforeEach
  void startServer() {
    server = ReplayServer.start();
  }

  @AfterEach
  void stopServer() {
    server.close();
  }

  private AnthropicModel model(boolean stream) {
    return AnthropicModel.builder()
        .model("claude-sonnet-4-5")
        .apiKey(KEY)
        .baseUrl(server.baseUrl())
        .stream(stream)
        .build();
  }

  @Test
  void streamsTheToolUseExchange() {
    server.enqueue("anthropic/tool-use-1-streamed.http");
    server.enqueue("anthropic/tool-use-2-streamed.http");
    AnthropicModel model = model(true);

    List<String> deltas = new ArrayList<>();
    ResponseMessage first = model.request(WeatherExchange.first(), deltas::add);
    assertThat(deltas).containsExactly("I'll check", " the current weather in", " Paris for you.");
    assertFirstTurn(first);

    deltas.clear();
    ResponseMessage second = model.request(WeatherExchange.second(first), deltas::add);
    assertThat(deltas).containsExactly("It's 18 °C", " with light rain", " in Paris right now.");
    assertSecondTurn(second);

    List<ReplayServer.Request> sent = server.requests();
    assertThat(sent).hasSize(2);
    assertSentFirstTurn(sent.get(0));
    assertThat(sent.get(0).json().path("stream").asBoolean()).isTrue();
    assertSentSecondTurn(sent.get(1));
  }

  @Test
  void requestsTheToolUseExchangeWithoutStreaming() {
    server.enqueue("anthropic/tool-use-1.http");
    server.enqueue("anthropic/tool-use-2.http");
    AnthropicModel model = model(false);

    List<String> deltas = new ArrayList<>();
    ResponseMessage first = model.request(WeatherExchange.first(), deltas::add);
    ResponseMessage second = model.request(WeatherExchange.second(first), deltas::add);

    assertFirstTurn(first);
    assertSecondTurn(second);
    assertThat(deltas).containsExactly(FIRST_TEXT, ANSWER);
    List<ReplayServer.Request> sent = server.requests();
    assertSentFirstTurn(sent.get(0));
    assertThat(sent.get(0).json().has("stream")).isFalse();
    assertSentSecondTurn(sent.get(1));
  }

  private static void assertFirstTurn(ResponseMessage response) {
    assertThat(response.text()).isEqualTo(FIRST_TEXT);
    assertThat(response.toolCalls()).hasSize(1);
    ResponsePart.ToolCall call = response.toolCalls().getFirst();
    assertThat(call.id()).isEqualTo(CALL_ID);
    assertThat(call.toolName()).isEqualTo("get_weather");
    assertThat(json(call.arguments())).isEqualTo(json("{\"city\":\"Paris\",\"unit\":\"celsius\"}"));
    assertThat(response.parts().getFirst()).isInstanceOf(ResponsePart.Text.class);
    assertThat(response.usage()).isEqualTo(Usage.ofTokens(412, 74));
    assertThat(response.modelName()).isEqualTo("claude-sonnet-4-5-20250929");
  }

  private static void assertSecondTurn(ResponseMessage response) {
    assertThat(response.parts()).containsExactly(new ResponsePart.Text(ANSWER));
    // 420 uncached input tokens and 100 read from the prompt cache
    assertThat(response.usage()).isEqualTo(Usage.ofTokens(520, 19));
    assertThat(response.modelName()).isEqualTo("claude-sonnet-4-5-20250929");
  }

  private static void assertSentFirstTurn(ReplayServer.Request request) {
    assertThat(request.method()).isEqualTo("POST");
    assertThat(request.path()).isEqualTo("/v1/messages");
    assertThat(request.headers()).containsKey("anthropic-version");
    // this SDK version sends a key as a bearer token
    assertThat(request.headers()).containsEntry("authorization", "Bearer " + KEY);
    JsonNode body = request.json();
    assertThat(body.path("model").asText()).isEqualTo("claude-sonnet-4-5");
    assertThat(body.path("max_tokens").asInt()).isEqualTo(1024);
    assertThat(body.path("temperature").asDouble()).isEqualTo(0.2);
    assertThat(body.path("system").asText()).isEqualTo(INSTRUCTIONS);
    assertThat(body.path("tools"))
        .isEqualTo(
            json(
                List.of(
                    java.util.Map.of(
                        "name", "get_weather",
                        "description", "The current weather in a city.",
                        "input_schema", SCHEMA))));
    assertThat(body.path("messages"))
        .isEqualTo(
            json(
                """
                [{"role": "user", "content": [{"type": "text", "text": "%s"}]}]
                """
                    .formatted(PROMPT)));
  }

  private static void assertSentSecondTurn(ReplayServer.Request request) {
    JsonNode messages = request.json().path("messages");
    assertThat(messages)
        .isEqualTo(
            json(
                """
                [
                  {"role": "user", "content": [{"type": "text", "text": "%s"}]},
                  {"role": "assistant", "content": [
                    {"type": "text", "text": "%s"},
                    {"type": "tool_use", "id": "%s", "name": "get_weather",
                     "input": {"city": "Paris", "unit": "celsius"}}
                  ]},
                  {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "%s", "content": "18 °C, light rain"}
                  ]}
                ]
                """
                    .formatted(PROMPT, FIRST_TEXT, CALL_ID, CALL_ID)));
  }

  @Test
  void mergesUserSidePartsAndMarksFailedToolsAndRetriesAsErrors() {
    server.enqueue("anthropic/tool-use-2.http");
    ResponseMessage calls =
        ResponseMessage.of(
            List.of(
                new ResponsePart.Text(""),
                new ResponsePart.ToolCall("toolu_a", "get_weather", "{\"city\":\"Oslo\"}"),
                new ResponsePart.ToolCall("toolu_b", "get_weather", "{not json")));
    ModelRequest request =
        new ModelRequest(
            List.of(
                RequestMessage.userPrompt("Oslo and Bergen?"),
                calls,
                new RequestMessage(
                    List.of(
                        new RequestPart.ToolReturn(
                            "toolu_a", "get_weather", "Error: service down", true),
                        new RequestPart.RetryPrompt(
                            "toolu_b", "get_weather", "The arguments are not valid JSON.")),
                    Instant.now()),
                RequestMessage.userPrompt("Try again.")),
            "",
            List.of(),
            new ModelSettings(256, null));

    model(false).request(request, delta -> {});

    JsonNode body = server.requests().getFirst().json();
    assertThat(body.has("system")).isFalse();
    assertThat(body.has("temperature")).isFalse();
    assertThat(body.has("tools")).isFalse();
    assertThat(body.path("max_tokens").asInt()).isEqualTo(256);
    assertThat(body.path("messages"))
        .isEqualTo(
            json(
                """
                [
                  {"role": "user", "content": [{"type": "text", "text": "Oslo and Bergen?"}]},
                  {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather",
                     "input": {"city": "Oslo"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {}}
                  ]},
                  {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a",
                     "content": "Error: service down", "is_error": true},
                    {"type": "tool_result", "tool_use_id": "toolu_b",
                     "content": "The arguments are not valid JSON.", "is_error": true},
                    {"type": "text", "text": "Try again."}
                  ]}
                ]
                """));
  }

  @Test
  void anAuthenticationErrorNamesTheStatusAndTheApiMessageButNotTheKey() {
    server.enqueue("anthropic/error-401.http");

    assertThatThrownBy(() -> model(true).request(WeatherExchange.first(), delta -> {}))
        .isInstanceOf(ModelException.class)
        .hasMessage(
            "anthropic: HTTP 401 (authentication_error): invalid x-api-key"
                + " [request req_011CVaA2nM8xJ5rPqLw3Tz7K]")
        .message()
        .doesNotContain(KEY);
    assertThat(server.requests()).hasSize(1);
  }

  @Test
  void anErrorEventInTheStreamFailsTheRequestAfterTheTextSoFar() {
    server.enqueue("anthropic/overloaded-mid-stream.http");
    List<String> deltas = new ArrayList<>();

    assertThatThrownBy(() -> model(true).request(WeatherExchange.first(), deltas::add))
        .isInstanceOf(ModelException.class)
        .hasMessage("anthropic: the stream failed (overloaded_error): Overloaded");
    assertThat(deltas).containsExactly("I'll check");
  }

  @Test
  void aStreamThatEndsBeforeMessageStopFailsTheRequest() {
    server.enqueue("anthropic/truncated-stream.http"); // the connection closes mid-message

    assertThatThrownBy(() -> model(true).request(WeatherExchange.first(), delta -> {}))
        .isInstanceOf(ModelException.class)
        .hasMessage(
            "anthropic: the stream ended before the message was complete (no message_stop)");
  }

  @Test
  void anUnreachableApiIsAnIoFailure() throws IOException {
    String baseUrl;
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      baseUrl = "http://127.0.0.1:" + socket.getLocalPort(); // nothing listens once it is closed
    }
    AnthropicModel model =
        AnthropicModel.builder()
            .model("claude-sonnet-4-5")
            .apiKey(KEY)
            .baseUrl(baseUrl)
            .maxRetries(0) // the SDK's backoff would only make the test slow
            .build();
    assertThatThrownBy(() -> model.request(WeatherExchange.first(), delta -> {}))
        .isInstanceOf(ModelException.class)
        .hasMessageStartingWith("anthropic: could not reach the API: ")
        .hasMessageContaining(baseUrl.substring("http://".length()));
  }

  @Test
  void withoutAKeyInTheEnvironmentTheVariableIsNamed() {
    assertThatThrownBy(() -> AnthropicModel.fromEnvironment("claude-sonnet-4-5", name -> null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ANTHROPIC_API_KEY");
  }

  @Test
  void isNamedAfterItsProviderAndModel() {
    assertThat(model(true).name()).isEqualTo("anthropic:claude-sonnet-4-5");
  }
}
