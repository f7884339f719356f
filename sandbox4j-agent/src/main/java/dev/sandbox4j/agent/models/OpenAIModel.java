package dev.sandbox4j.agent.models;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.errors.OpenAIException;
import com.openai.errors.OpenAIInvalidDataException;
import com.openai.errors.OpenAIIoException;
import com.openai.errors.OpenAIServiceException;
import com.openai.errors.SseException;
import com.openai.helpers.ChatCompletionAccumulator;
import com.openai.models.FunctionDefinition;
import com.openai.models.FunctionParameters;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionAssistantMessageParam;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionFunctionTool;
import com.openai.models.chat.completions.ChatCompletionMessage;
import com.openai.models.chat.completions.ChatCompletionMessageFunctionToolCall;
import com.openai.models.chat.completions.ChatCompletionMessageToolCall;
import com.openai.models.chat.completions.ChatCompletionStreamOptions;
import com.openai.models.chat.completions.ChatCompletionToolMessageParam;
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
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A {@link Model} backed by OpenAI's Chat Completions API, through the official Java SDK ({@code
 * com.openai:openai-java}); it also serves the many servers that speak that API, through {@link
 * Builder#baseUrl}.
 *
 * {@snippet :
 * Model model = OpenAIModel.fromEnvironment("gpt-5"); // OPENAI_API_KEY
 * Model local = OpenAIModel.builder()
 *     .model("qwen3-coder")
 *     .apiKey("unused")
 *     .baseUrl("http://127.0.0.1:11434/v1")
 *     .build();
 * }
 *
 * <p>How a conversation is sent: the instructions are a {@code system} message; a user prompt is a
 * {@code user} message; the model's earlier text and tool calls are an {@code assistant} message
 * with {@code tool_calls}; a tool result is a {@code tool} message with its {@code tool_call_id},
 * and so is a retry prompt (its text saying what to fix; the API has no error flag, the text says
 * so). Tools are function tools with their JSON schema as {@code parameters}; {@link
 * dev.sandbox4j.agent.ModelSettings} gives {@code max_completion_tokens} and {@code temperature}.
 *
 * <p>Each request streams (unless built with {@code stream(false)}) and asks for usage in the
 * stream ({@code stream_options.include_usage}): text reaches {@code onTextDelta} as the API sends
 * it, and the returned response holds the whole text (a refusal counts as text), the tool calls
 * (arguments as the model wrote them), the usage and the model name the API reported.
 *
 * <p>An instance is immutable and thread-safe; concurrent runs share its SDK client and its
 * connection pool. The SDK retries connection failures, 408, 409, 429 and 5xx answers twice with
 * backoff; then, and for any other failure, {@link #request} throws {@link ModelException}, whose
 * message names the provider, the HTTP status, the API's error type and message, never the key.
 */
public final class OpenAIModel implements Model {

  static final String PROVIDER = "openai";
  static final String API_KEY_VARIABLE = "OPENAI_API_KEY";
  static final String BASE_URL_VARIABLE = "OPENAI_BASE_URL";

  private final OpenAIClient client;
  private final String model;
  private final String apiKey;
  private final boolean stream;

  private OpenAIModel(OpenAIClient client, String model, String apiKey, boolean stream) {
    this.client = client;
    this.model = model;
    this.apiKey = apiKey;
    this.stream = stream;
  }

  /**
   * The model {@code model} (such as {@code gpt-5}), with the key and base URL the SDK reads from
   * {@code OPENAI_API_KEY} and {@code OPENAI_BASE_URL}.
   *
   * @throws IllegalArgumentException if {@code OPENAI_API_KEY} is not set
   */
  public static OpenAIModel fromEnvironment(String model) {
    return builder().model(model).build();
  }

  static OpenAIModel fromEnvironment(String model, Function<String, String> env) {
    return builder().model(model).environment(env).build();
  }

  /** A builder for explicit configuration; what it is not given comes from the environment. */
  public static Builder builder() {
    return new Builder();
  }

  /** {@code openai:<model>}, the name {@link Model#of} reads. */
  @Override
  public String name() {
    return PROVIDER + ":" + model;
  }

  @Override
  public ResponseMessage request(ModelRequest request, Consumer<String> onTextDelta) {
    ChatCompletionCreateParams params = params(request);
    try {
      ChatCompletion completion =
          stream ? streamed(params, onTextDelta) : whole(params, onTextDelta);
      return response(completion);
    } catch (OpenAIException e) {
      throw ProviderSupport.cancelledOr(failure(e));
    }
  }

  private ChatCompletion streamed(ChatCompletionCreateParams params, Consumer<String> onTextDelta) {
    ChatCompletionAccumulator accumulator = ChatCompletionAccumulator.create();
    try (StreamResponse<ChatCompletionChunk> chunks =
        client.chat().completions().createStreaming(params)) {
      chunks.stream()
          .forEach(
              chunk -> {
                accumulator.accumulate(chunk);
                for (ChatCompletionChunk.Choice choice : chunk.choices()) {
                  // only the first choice is the response; n is never set, so there is one
                  if (choice.index() == 0) {
                    choice.delta().content().filter(t -> !t.isEmpty()).ifPresent(onTextDelta);
                  }
                }
              });
    }
    try {
      return accumulator.chatCompletion();
    } catch (IllegalStateException e) {
      // the accumulator has a completion only once a chunk carried a finish_reason
      throw new ModelException(
          PROVIDER + ": the stream ended before the completion was finished (no finish_reason)", e);
    }
  }

  private ChatCompletion whole(ChatCompletionCreateParams params, Consumer<String> onTextDelta) {
    ChatCompletion completion = client.chat().completions().create(params);
    completion.choices().stream()
        .findFirst()
        .flatMap(choice -> choice.message().content())
        .filter(text -> !text.isEmpty())
        .ifPresent(onTextDelta);
    return completion;
  }

  private ChatCompletionCreateParams params(ModelRequest request) {
    ChatCompletionCreateParams.Builder params =
        ChatCompletionCreateParams.builder()
            .model(model)
            .maxCompletionTokens(request.settings().maxTokens());
    if (request.settings().temperature() != null) {
      params.temperature(request.settings().temperature());
    }
    if (stream) {
      params.streamOptions(ChatCompletionStreamOptions.builder().includeUsage(true).build());
    }
    if (!request.instructions().isBlank()) {
      params.addSystemMessage(request.instructions());
    }
    for (ToolDefinition tool : request.tools()) {
      params.addTool(tool(tool));
    }
    for (Message message : request.messages()) {
      switch (message) {
        case RequestMessage user -> {
          for (RequestPart part : user.parts()) {
            switch (part) {
              case RequestPart.UserPrompt prompt -> params.addUserMessage(prompt.text());
              case RequestPart.ToolReturn result ->
                  params.addMessage(toolMessage(result.toolCallId(), result.content()));
              case RequestPart.RetryPrompt retry ->
                  params.addMessage(toolMessage(retry.toolCallId(), retry.content()));
            }
          }
        }
        case ResponseMessage response -> assistant(response).ifPresent(params::addMessage);
      }
    }
    return params.build();
  }

  private static ChatCompletionFunctionTool tool(ToolDefinition definition) {
    FunctionParameters.Builder parameters = FunctionParameters.builder();
    definition
        .parametersSchema()
        .forEach((key, value) -> parameters.putAdditionalProperty(key, JsonValue.from(value)));
    FunctionDefinition.Builder function =
        FunctionDefinition.builder().name(definition.name()).parameters(parameters.build());
    if (!definition.description().isEmpty()) {
      function.description(definition.description());
    }
    return ChatCompletionFunctionTool.builder().function(function.build()).build();
  }

  private static ChatCompletionToolMessageParam toolMessage(String toolCallId, String content) {
    return ChatCompletionToolMessageParam.builder().toolCallId(toolCallId).content(content).build();
  }

  /** The model's earlier response, or nothing when it had neither text nor calls. */
  private static Optional<ChatCompletionAssistantMessageParam> assistant(ResponseMessage response) {
    ChatCompletionAssistantMessageParam.Builder assistant =
        ChatCompletionAssistantMessageParam.builder();
    String text = response.text();
    if (!text.isEmpty()) {
      assistant.content(text);
    }
    List<ResponsePart.ToolCall> calls = response.toolCalls();
    for (ResponsePart.ToolCall call : calls) {
      assistant.addToolCall(
          ChatCompletionMessageFunctionToolCall.builder()
              .id(call.id())
              .function(
                  ChatCompletionMessageFunctionToolCall.Function.builder()
                      .name(call.toolName())
                      .arguments(call.arguments())
                      .build())
              .build());
    }
    return text.isEmpty() && calls.isEmpty() ? Optional.empty() : Optional.of(assistant.build());
  }

  private static ResponseMessage response(ChatCompletion completion) {
    if (completion.choices().isEmpty()) {
      throw new ModelException(PROVIDER + ": the completion has no choices");
    }
    ChatCompletionMessage message = completion.choices().getFirst().message();
    List<ResponsePart> parts = new ArrayList<>();
    message.content().filter(t -> !t.isEmpty()).ifPresent(t -> parts.add(new ResponsePart.Text(t)));
    message.refusal().filter(t -> !t.isEmpty()).ifPresent(t -> parts.add(new ResponsePart.Text(t)));
    for (ChatCompletionMessageToolCall call : message.toolCalls().orElse(List.of())) {
      // custom (free-text) tools are never sent, so every call is a function call
      call.function()
          .ifPresent(
              function ->
                  parts.add(
                      new ResponsePart.ToolCall(
                          function.id(),
                          function.function().name(),
                          function.function().arguments())));
    }
    Usage usage =
        completion
            .usage()
            .map(u -> Usage.ofTokens(u.promptTokens(), u.completionTokens()))
            .orElse(Usage.ofTokens(0, 0));
    return new ResponseMessage(parts, usage, completion.model(), null, Instant.now());
  }

  private ModelException failure(OpenAIException e) {
    return switch (e) {
      case SseException sse ->
          // an error object inside a stream that began with 200: it says what happened
          new ModelException(
              ProviderSupport.redact(
                  PROVIDER
                      + ": the stream failed"
                      + sse.type().map(type -> " (" + type + ")").orElse("")
                      + ": "
                      + errorMessage(sse).orElse("no error message"),
                  apiKey),
              e);
      case OpenAIServiceException service ->
          ProviderSupport.httpFailure(
              PROVIDER,
              service.statusCode(),
              service.code().or(service::type),
              errorMessage(service),
              service.headers().values("x-request-id").stream().findFirst(),
              apiKey,
              e);
      case OpenAIIoException io ->
          new ModelException(
              ProviderSupport.redact(
                  PROVIDER + ": could not reach the API: " + ProviderSupport.describe(io), apiKey),
              e);
      case OpenAIInvalidDataException invalid ->
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

  /** The {@code message} of the error object the SDK kept as the exception's body. */
  private static Optional<String> errorMessage(OpenAIServiceException e) {
    try {
      if (e.body().convert(Object.class) instanceof Map<?, ?> error
          && error.get("message") instanceof String message) {
        return Optional.of(message);
      }
    } catch (RuntimeException unreadable) {
      // an error body that is not an error object: there is no message to show
    }
    return Optional.empty();
  }

  /**
   * Options of an {@link OpenAIModel}. The model is required; a key or base URL not given comes
   * from {@code OPENAI_API_KEY} and {@code OPENAI_BASE_URL}.
   */
  public static final class Builder {
    private String model;
    private String apiKey;
    private String baseUrl;
    private boolean stream = true;
    private Integer maxRetries;
    private Function<String, String> environment = System::getenv;

    private Builder() {}

    /** The model's API name, such as {@code gpt-5}. */
    public Builder model(String model) {
      this.model = Objects.requireNonNull(model, "model");
      return this;
    }

    /** The API key, instead of {@code OPENAI_API_KEY}. */
    public Builder apiKey(String apiKey) {
      this.apiKey = Objects.requireNonNull(apiKey, "apiKey");
      return this;
    }

    /**
     * The API's base URL, including its {@code /v1} (the default is {@code
     * https://api.openai.com/v1}), instead of {@code OPENAI_BASE_URL}.
     */
    public Builder baseUrl(String baseUrl) {
      this.baseUrl = Objects.requireNonNull(baseUrl, "baseUrl");
      return this;
    }

    /**
     * Whether to stream each response (the default). Without streaming, {@code onTextDelta} gets
     * the whole text at once, when the response is complete: for servers that do not stream.
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
    public OpenAIModel build() {
      if (model == null || model.isBlank()) {
        throw new IllegalArgumentException("an OpenAI model needs a model name, such as gpt-5");
      }
      if (apiKey == null
          && !ProviderSupport.anySet(environment, API_KEY_VARIABLE, "openai.apiKey")
          && !ProviderSupport.present(environment.apply("AZURE_OPENAI_KEY"))) {
        throw new IllegalArgumentException(
            "the OpenAI model '"
                + model
                + "' needs an API key: set the environment variable "
                + API_KEY_VARIABLE
                + " (or give one to OpenAIModel.builder().apiKey(...))");
      }
      // The SDK's fromEnv reads the rest of its settings (custom headers, organization, log
      // level); key and base URL are set again from what was given or from `environment`, so that
      // what was given wins and a test's environment is the one used.
      OpenAIOkHttpClient.Builder client = OpenAIOkHttpClient.builder().fromEnv();
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
      return new OpenAIModel(client.build(), model, key, stream);
    }
  }
}
