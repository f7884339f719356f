package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/** Small tools and scripted models the agent tests drive runs with. */
final class TestTools {
  private TestTools() {}

  record PathAndText(@Param("file path") String path, @Param("text to write") String text) {}

  record PathOnly(@Param("file path") String path) {}

  record CommandLine(
      @Param("shell command") String command,
      @Param(value = "seconds before it is killed", required = false) Integer timeoutSeconds) {}

  static final Tool WRITE =
      Tool.of(
          "put",
          "Writes text to a file.",
          PathAndText.class,
          (ctx, args) -> {
            ctx.workspace().writeText(args.path(), args.text());
            return "wrote " + args.path();
          });

  static final Tool READ =
      Tool.of(
          "get",
          "Reads a file.",
          PathOnly.class,
          (ctx, args) -> ctx.workspace().readText(args.path()));

  static final Tool SH =
      Tool.of(
          "sh",
          "Runs a shell command.",
          CommandLine.class,
          (ctx, args) -> {
            RunOptions options =
                args.timeoutSeconds() == null
                    ? RunOptions.defaults()
                    : RunOptions.withTimeout(Duration.ofSeconds(args.timeoutSeconds()));
            CommandResult result = ctx.workspace().run(Command.shell(args.command()), options);
            return result.stdoutText() + result.stderrText() + "[exit " + result.exitCode() + "]";
          });

  /** A model that makes the given tool calls, one response each, then answers {@code done}. */
  static Model scripted(String... callsAsNameThenJson) {
    List<ResponseMessage> responses = new ArrayList<>();
    for (int i = 0; i < callsAsNameThenJson.length; i += 2) {
      responses.add(
          ResponseMessage.toolCall(
              "call-" + (i / 2), callsAsNameThenJson[i], callsAsNameThenJson[i + 1]));
    }
    responses.add(ResponseMessage.text("done"));
    AtomicInteger next = new AtomicInteger();
    return dev.sandbox4j.agent.models.FunctionModel.of(
        request -> responses.get(Math.min(next.getAndIncrement(), responses.size() - 1)));
  }

  /** A model whose responses depend on the request. */
  static Model function(Function<ModelRequest, ResponseMessage> function) {
    return dev.sandbox4j.agent.models.FunctionModel.of(function);
  }

  /** The parts of the last request message of {@code request}. */
  static List<RequestPart> lastParts(ModelRequest request) {
    return ((RequestMessage) request.messages().getLast()).parts();
  }
}
