package dev.sandbox4j.agent.models;

import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.ResponseMessage;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A model whose every response a Java function decides: for tests, demos and scripted agents.
 *
 * {@snippet :
 * Model model = FunctionModel.of(request ->
 *     request.messages().size() == 1
 *         ? ResponseMessage.toolCall("1", "run_command", "{\"command\": \"ls\"}")
 *         : ResponseMessage.text("done"));
 * }
 *
 * <p>Text of a response reaches a streaming listener as one delta. The function must be thread-safe
 * if the agent has concurrent runs.
 */
public final class FunctionModel implements Model {

  private final String name;
  private final Function<ModelRequest, ResponseMessage> function;

  private FunctionModel(String name, Function<ModelRequest, ResponseMessage> function) {
    this.name = Objects.requireNonNull(name, "name");
    this.function = Objects.requireNonNull(function, "function");
  }

  /** A model named {@code function} that answers with {@code function}. */
  public static FunctionModel of(Function<ModelRequest, ResponseMessage> function) {
    return new FunctionModel("function", function);
  }

  /** A model with its own name that answers with {@code function}. */
  public static FunctionModel of(String name, Function<ModelRequest, ResponseMessage> function) {
    return new FunctionModel(name, function);
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public ResponseMessage request(ModelRequest request, Consumer<String> onTextDelta) {
    ResponseMessage response =
        Objects.requireNonNull(function.apply(request), "the model function returned null");
    String text = response.text();
    if (!text.isEmpty()) {
      onTextDelta.accept(text);
    }
    return response;
  }
}
