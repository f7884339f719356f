package dev.sandbox4j.agent.models;

import com.anthropic.client.AnthropicClient;
import com.anthropic.client.okhttp.AnthropicOkHttpClient;
import com.anthropic.core.JsonValue;
import com.anthropic.core.http.StreamResponse;
import com.anthropic.errors.AnthropicException;
import com.anthropic.errors.AnthropicInvalidDataException;
import com.anthropic.errors.AnthropicIoException;
import com.anthropic.errors.AnthropicServiceException;
import com.anthropic.errors.SseException;
import com.anthropic.helpers.MessageAccumulator;
import com.anthropic.models.ErrorType;
import com.anthropic.models.messages.ContentBlock;
import com.anthropic.models.messages.ContentBlockParam;
import com.anthropic.models.messages.MessageCreateParams;
import com.anthropic.models.messages.MessageParam;
import com.anthropic.models.messages.RawMessageStreamEvent;
import com.anthropic.models.messages.TextBlockParam;
import com.anthropic.models.messages.ToolResultBlockParam;
import com.anthropic.models.messages.ToolUseBlockParam;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.ModelException;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.ToolDefinition;
import dev.sandbox4j.agent.Usage;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A {@link Model} backed by Anthropic's Messages API, through the official Java SDK ({@code
 * com.anthropic:anthropic-java}).
 *
 * {@snippet :
 * Model model = AnthropicModel.fromEnvironment("claude-sonnet-4-5"); // ANTHROPIC_API_KEY
 * Model viaProxy = AnthropicModel.builder()
 *     .model("claude-sonnet-4-5")
 *     .apiKey(key)
 *     .baseUrl("http://127.0.0.1:8080")
 *     .build();
 * }
 *
 * <p>How a conversation is sent: the instructions are the {@code system} prompt; a user prompt is a
 * user text block; a tool result is a user {@code tool_result} block ({@code is_error} when the
 * tool failed), and so is a retry prompt (always {@code is_error}, its text saying what to fix);
 * parts on the user side that follow each other go in one user message, as the API requires; the
 * model's earlier text and tool calls are assistant text and {@code tool_use} blocks. Tools are
 * sent with their JSON schema as {@code input_schema}; {@link dev.sandbox4j.agent.ModelSettings}
 * gives {@code max_tokens} and {@code temperature}.
 *
 * <p>Each request streams (unless built with {@code stream(false)}): text reaches {@code
 * onTextDelta} as the API sends it, and the returned response holds the whole text, the tool calls
 * (arguments as the JSON object the model wrote), the usage (input tokens include cache reads and
 * writes) and the model name the API reported. Thinking and server-side tool blocks are not kept.
 *
 * <p>An instance is immutable and thread-safe; concurrent runs share its SDK client and its
 * connection pool. The SDK retries connection failures, 408, 409, 429 and 5xx answers twice with
 * backoff; then, and for any other failure, {@link #request} throws {@link ModelException}, whose
 * message names the provider, the HTTP status, the API's error type and message, never the key.
 */
public final class AnthropicModel implements Model {

  static final String PROVIDER = "anthropic";
  static final String API_KEY_VARIABLE = "ANTHROPIC_API_KEY";
  static final String BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL";
  private static final String AUTH_TOKEN_VARIABLE = "ANTHROPIC_AUTH_TOKEN";

  private final AnthropicClient client;
  private final String model;
  private final String apiKey;
  private final boolean stream;

  private AnthropicModel(AnthropicClient client, String model, String apiKey, boolean stream) {
    this.client = client;
    this.model = model;
    this.apiKey = apiKey;
    this.stream = stream;
  }

  /**
   * The model {@code model} (such as {@code claude-sonnet-4-5}), with the key and base URL the SDK
   * reads from {@code ANTHROPIC_API_KEY} (or {@code ANTHROPIC_AUTH_TOKEN}) and {@code
   * ANTHROPIC_BASE_URL}.
   *
   * @throws IllegalArgumentException if {@code ANTHROPIC_API_KEY} is not set
   */
  public static AnthropicModel fromEnvironment(String model) {
    return builder().model(model).build();
  }

  static AnthropicModel fromEnvironment(String model, Function<String, String> env) {
    return builder().model(model).environment(env).build();
  }

  /** A builder for explicit configuration; what it is not given comes from the environment. */
  public static Builder builder() {
    return new Builder();
  }

  /** {@code anthropic:<model>}, the name {@link Model#of} reads. */
  @Override
  public String name() {
    return PROVIDER + ":" + model;
  }

  @Override
  public ResponseMessage request(ModelRequest request, Consumer<String> onTextDelta) {
    MessageCreateParams params = params(request);
    try {
      com.anthropic.models.messages.Message message =
          stream ? streamed(params, onTextDelta) : whole(params, onTextDelta);
      return response(message);
    } catch (AnthropicException e) {
      throw ProviderSupport.cancelledOr(failure(e));
    }
  }

  private com.anthropic.models.messages.Message streamed(
      MessageCreateParams params, Consumer<String> onTextDelta) {
    MessageAccumulator accumulator = MessageAccumulator.create();
    try (StreamResponse<RawMessageStreamEvent> events = client.messages().createStreaming(params)) {
      events.stream()
          .forEach(
              event -> {
                accumulator.accumulate(event);
                event
                    .contentBlockDelta()
                    .flatMap(delta -> delta.delta().text())
                    .map(text -> text.text())
                    .filter(text -> !text.isEmpty())
                    .ifPresent(onTextDelta);
              });
    }
    try {
      return accumulator.message();
    } catch (IllegalStateException e) {
      // the accumulator has a message only once it saw message_stop
      throw new ModelException(
          PROVIDER + ": the stream ended before the message was complete (no message_stop)", e);
    }
  }

  private com.anthropic.models.messages.Message whole(
      MessageCreateParams params, Consumer<String> onTextDelta) {
    com.anthropic.models.messages.Message message = client.messages().create(params);
    String text =
        message.content().stream()
            .flatMap(block -> block.text().stream())
            .map(block -> block.text())
            .reduce("", String::concat);
    if (!text.isEmpty()) {
      onTextDelta.accept(text);
    }
    return message;
  }

  private MessageCreateParams params(ModelRequest request) {
    MessageCreateParams.Builder params =
        MessageCreateParams.builder().model(model).maxTokens(request.settings().maxTokens());
    if (!request.instructions().isBlank()) {
      params.system(request.instructions());
    }
    if (request.settings().temperature() != null) {
      // this SDK version has no temperature setter; the API still reads the field
      params.putAdditionalBodyProperty(
          "temperature", JsonValue.from(request.settings().temperature()));
    }
    for (ToolDefinition tool : request.tools()) {
      params.addTool(tool(tool));
    }
    params.messages(messages(request.messages()));
    return params.build();
  }

  private static com.anthropic.models.messages.Tool tool(ToolDefinition definition) {
    com.anthropic.models.messages.Tool.Builder tool =
        com.anthropic.models.messages.Tool.builder()
            .name(definition.name())
            .inputSchema(
                JsonValue.from(definition.parametersSchema())
                    .convert(com.anthropic.models.messages.Tool.InputSchema.class));
    if (!definition.description().isEmpty()) {
      tool.description(definition.description());
    }
    return tool.build();
  }

  /** The history as alternating user and assistant messages. */
  private static List<MessageParam> messages(List<Message> history) {
    List<MessageParam> messages = new ArrayList<>();
    List<ContentBlockParam> blocks = new ArrayList<>();
    boolean userSide = true;
    for (Message message : history) {
      boolean user = message instanceof RequestMessage;
      if (user != userSide && !blocks.isEmpty()) {
        messages.add(message(userSide, blocks));
        blocks = new ArrayList<>();
      }
      userSide = user;
      switch (message) {
        case RequestMessage request -> {
          for (RequestPart part : request.parts()) {
            blocks.add(block(part));
          }
        }
        case ResponseMessage response -> {
          for (ResponsePart part : response.parts()) {
            switch (part) {
              // the API rejects empty text blocks
              case ResponsePart.Text text when text.text().isEmpty() -> {}
              case ResponsePart.Text text -> blocks.add(text(text.text()));
              case ResponsePart.ToolCall call -> blocks.add(toolUse(call));
            }
          }
        }
      }
    }
    if (!blocks.isEmpty()) {
      messages.add(message(userSide, blocks));
    }
    return messages;
  }

  private static MessageParam message(boolean user, List<ContentBlockParam> blocks) {
    return user
        ? MessageParam.ofUserOfContentBlockParams(List.copyOf(blocks))
        : MessageParam.ofAssistantOfContentBlockParams(List.copyOf(blocks));
  }

  private static ContentBlockParam block(RequestPart part) {
    return switch (part) {
      case RequestPart.UserPrompt prompt -> text(prompt.text());
      case RequestPart.ToolReturn result ->
          toolResult(result.toolCallId(), result.content(), result.error());
      case RequestPart.RetryPrompt retry -> toolResult(retry.toolCallId(), retry.content(), true);
    };
  }

  private static ContentBlockParam text(String text) {
    return ContentBlockParam.ofText(TextBlockParam.builder().text(text).build());
  }

  private static ContentBlockParam toolResult(String toolUseId, String content, boolean error) {
    ToolResultBlockParam.Builder result =
        ToolResultBlockParam.builder().toolUseId(toolUseId).content(content);
    if (error) {
      result.isError(true);
    }
    return ContentBlockParam.ofToolResult(result.build());
  }

  private static ContentBlockParam toolUse(ResponsePart.ToolCall call) {
    ToolUseBlockParam.Input.Builder input = ToolUseBlockParam.Input.builder();
    ProviderSupport.argumentsObject(call.arguments())
        .forEach((key, value) -> input.putAdditionalProperty(key, JsonValue.from(value)));
    return ContentBlockParam.ofToolUse(
        ToolUseBlockParam.builder()
            .id(call.id())
            .name(call.toolName())
            .input(input.build())
            .build());
  }

  private static ResponseMessage response(com.anthropic.models.messages.Message message) {
    List<ResponsePart> parts = new ArrayList<>();
    for (ContentBlock block : message.content()) {
      block
          .text()
          .filter(text -> !text.text().isEmpty())
          .ifPresent(text -> parts.add(new ResponsePart.Text(text.text())));
      block
          .toolUse()
          .ifPresent(
              use ->
                  parts.add(
                      new ResponsePart.ToolCall(
                          use.id(),
                          use.name(),
                          ProviderSupport.toJson(use._input().convert(Object.class)))));
    }
    com.anthropic.models.messages.Usage usage = message.usage();
    long input =
        usage.inputTokens()
            + usage.cacheCreationInputTokens().orElse(0L)
            + usage.cacheReadInputTokens().orElse(0L);
    return new ResponseMessage(
        parts,
        Usage.ofTokens(input, usage.outputTokens()),
        message.model().asString(),
        null,
        Instant.now());
  }

  private ModelException failure(AnthropicException e) {
    return switch (e) {
      case SseException sse ->
          // an error event inside a stream that began with 200: the event says what happened
          new ModelException(
              ProviderSupport.redact(
                  PROVIDER
                      + ": the stream failed"
                      + sse.type().map(type -> " (" + type.asString() + ")").orElse("")
                      + ": "
                      + sse.apiMessage().orElse("no error message"),
                  apiKey),
              e);
      case AnthropicServiceException service ->
          ProviderSupport.httpFailure(
              PROVIDER,
              service.statusCode(),
              service.type().map(ErrorType::asString),
              service.apiMessage(),
              service.requestId(),
              apiKey,
              e);
      case AnthropicIoException io ->
          new ModelException(
              ProviderSupport.redact(
                  PROVIDER + ": could not reach the API: " + ProviderSupport.describe(io), apiKey),
              e);
      case AnthropicInvalidDataException invalid ->
          new ModelException(
              ProviderSupport.redact(
                  PROVIDER
                      + ": could not read the API's answer: "
                      + ProviderSupport.describe(invalid),
                  apiKey),
              e);
      default ->
          new ModelException(
              ProviderSupport.redact(PROVIDER + ": " + ProviderSupport.describe(e), apiKey), e);
    };
  }

  /**
   * Options of an {@link AnthropicModel}. The model is required; a key or base URL not given comes
   * from {@code ANTHROPIC_API_KEY} and {@code ANTHROPIC_BASE_URL}.
   */
  public static final class Builder {
    private String model;
    private String apiKey;
    private String baseUrl;
    private boolean stream = true;
    private Integer maxRetries;
    private Function<String, String> environment = System::getenv;

    private Builder() {}

    /** The model's API name, such as {@code claude-sonnet-4-5}. */
    public Builder model(String model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** The API key, instead of {@code ANTHROPIC_API_KEY}. */
    public Builder apiKey(String apiKey) {
      this.apiKey = Objects.requireNonNull(apiKey, "apiKey");
      return this;
    }

    /** The API's base URL (without {@code /v1}), instead of {@code ANTHROPIC_BASE_URL}. */
    public Builder baseUrl(String baseUrl) {
      this.baseUrl = Objects.requireNonNull(baseUrl, "baseUrl");
      return this;
    }

    /**
     * Whether to stream each response (the default). Without streaming, {@code onTextDelta} gets
     * the whole text at once, when the response is complete: for gateways that do not pass
     * server-sent events through.
     */
    public Builder stream(boolean stream) {
      this.stream = stream;
      return this;
    }

    /** How often the SDK retries a failed request (2 by default): tests of failures want 0. */
    Builder maxRetries(int maxRetries) {
      this.maxRetries = maxRetries;
      return this;
    }

    /** Where environment variables are read from: tests give a map instead of the process's. */
    Builder environment(Function<String, String> environment) {
      this.environment = Objects.requireNonNull(environment, "environment");
      return this;
    }

    /**
     * @throws IllegalArgumentException if there is no model, or no key was given and none is in the
     *     environment
     */
    public AnthropicModel build() {
      if (model == null || model.isBlank()) {
        throw new IllegalArgumentException(
            "an Anthropic model needs a model name, such as claude-sonnet-4-5");
      }
      if (apiKey == null
          && !ProviderSupport.anySet(environment, API_KEY_VARIABLE, "anthropic.apiKey")
          && !ProviderSupport.anySet(environment, AUTH_TOKEN_VARIABLE, "anthropic.authToken")) {
        throw new IllegalArgumentException(
            "the Anthropic model '"
                + model
                + "' needs an API key: set the environment variable "
                + API_KEY_VARIABLE
                + " (or give one to AnthropicModel.builder().apiKey(...))");
      }
      // The SDK's fromEnv reads the rest of its settings (custom headers, organization, log
      // level); key and base URL are set again from what was given or from `environment`, so that
      // what was given wins and a test's environment is the one used.
      AnthropicOkHttpClient.Builder client = AnthropicOkHttpClient.builder().fromEnv();
      String key = apiKey != null ? apiKey : environment.apply(API_KEY_VARIABLE);
      if (ProviderSupport.present(key)) {
        client.apiKey(key);
      }
      String url = baseUrl != null ? baseUrl : environment.apply(BASE_URL_VARIABLE);
      if (ProviderSupport.present(url)) {
        client.baseUrl(url);
      }
      if (maxRetries != null) {
        client.maxRetries(maxRetries);
      }
      // the key is kept only to cut it out of error messages, should an error body echo it
      return new AnthropicModel(client.build(), model, key, stream);
    }
  }
}
