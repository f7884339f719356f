package dev.sandbox4j.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.agent.tools.Coder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j demo}: the whole harness at work, offline. A scripted model (no AI provider)
 * drives the real Coder tools in a real sandbox: it writes a small project with a failing test,
 * runs it, fixes the bug with an edit, and runs it green.
 */
@CommandLine.Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    description = {
      "Shows an agent fixing a bug in a sandbox, offline: a scripted model (no AI provider is"
          + " called) drives the real Coder tools in a real sandbox. It writes a small Python"
          + " project with a failing test, runs the test, edits the bug, and runs it green.",
      "The sandbox keeps running afterwards, with the project in it; the end of the output says"
          + " how to look at it and continue."
    })
final class DemoCommand implements Callable<Integer> {

  static final String CALC = "def add(a, b):\n    return a - b\n";
  static final String TEST =
      """
      import unittest

      from calc import add


      class AddTest(unittest.TestCase):
          def test_adds(self):
              self.assertEqual(add(2, 3), 5)


      if __name__ == "__main__":
          unittest.main()
      """;
  // -B: no bytecode cache; an edit that keeps the file's size within its mtime's second would
  // otherwise leave Python running the stale calc.pyc
  static final String RUN_TESTS = "python3 -B -m unittest -v test_calc.py";

  private static final ObjectMapper JSON = new ObjectMapper();

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description =
          "Where the sandbox is created: local (isolated), remote (a server's), docker (a Docker daemon's containers) or host (not isolated). Default:"
              + " remote with a server (--server), else local.")
  String provider;

  @Option(
      names = "--history",
      paramLabel = "FILE",
      description =
          "Save the conversation to FILE, so that 'sandbox4j run --history FILE \"…\"' can"
              + " continue it in the same sandbox with a real model.")
  Path history;

  @Mixin IsolationOption isolation;

  @Override
  public Integer call() {
    provider = root.providerOrDefault(provider);
    var err = root.context().err();
    err.println(
        "sandbox4j demo: a SCRIPTED model plays the agent (no AI provider is called); the tools,"
            + " the commands and the sandbox are real.");
    err.println();
    root.warnIfNotIsolated(provider);
    Agent agent =
        Agent.builder()
            .model(FunctionModel.of("demo-script", DemoCommand::next))
            .capability(
                WorkspaceCapability.of(
                    root.provider(
                        spec,
                        provider,
                        Providers.Settings.DEFAULTS.withIsolation(isolation.isolation))))
            .capability(Coder.builder().repoContext(false).build())
            .build();
    RunResult result =
        RunCommand.runAndReport(root, agent, "Fix the failing test.", RunConfig.builder(), history);
    result
        .workspace()
        .ifPresent(
            ref ->
                err.println(
                    "Look inside: sandbox4j exec "
                        + ref
                        + " -- cat calc.py\nContinue with a real model: sandbox4j run --workspace "
                        + ref
                        + " \"add a subtract function, with a test\""));
    return ExitCodes.OK;
  }

  /** The script: each step looks at what the previous tool calls returned. */
  static ResponseMessage next(ModelRequest request) {
    List<ResponseMessage> earlier = new ArrayList<>();
    List<String> results = new ArrayList<>();
    for (Message message : request.messages()) {
      if (message instanceof ResponseMessage response) {
        earlier.add(response);
      } else if (message instanceof RequestMessage r) {
        for (RequestPart part : r.parts()) {
          if (part instanceof RequestPart.ToolReturn t) {
            results.add(t.content());
          } else if (part instanceof RequestPart.RetryPrompt p) {
            results.add(p.content());
          }
        }
      }
    }
    String last = results.isEmpty() ? "" : results.getLast();
    return switch (earlier.size()) {
      case 0 ->
          respond(
              "I'll set up a small Python project with a test, then run it.",
              call(0, "write_file", "path", "calc.py", "content", CALC),
              call(1, "write_file", "path", "test_calc.py", "content", TEST));
      case 1 -> respond("Running the tests.", call(2, "shell", "command", RUN_TESTS));
      case 2 ->
          respond(
              (last.contains("FAILED")
                      ? "The test fails (" + lineWith(last, "AssertionError") + "). "
                      : "Unexpected: the tests did not fail. ")
                  + "Let me read calc.py.",
              call(3, "read_file", "path", "calc.py"));
      case 3 ->
          respond(
              "add() subtracts instead of adding. Fixing it.",
              call(
                  4,
                  "edit_file",
                  "path",
                  "calc.py",
                  "old_text",
                  "return a - b",
                  "new_text",
                  "return a + b"));
      case 4 -> respond("Running the tests again.", call(5, "shell", "command", RUN_TESTS));
      default ->
          ResponseMessage.text(
              last.contains("\nOK")
                  ? "Fixed: add() in calc.py subtracted its arguments; it adds them now, and the"
                      + " test passes."
                  : "The tests still fail; here is the last output:\n" + last);
    };
  }

  private static ResponseMessage respond(String text, ResponsePart.ToolCall... calls) {
    List<ResponsePart> parts = new ArrayList<>();
    parts.add(new ResponsePart.Text(text + "\n"));
    parts.addAll(List.of(calls));
    return ResponseMessage.of(parts);
  }

  private static ResponsePart.ToolCall call(int n, String tool, String... keysAndValues) {
    ObjectNode args = JSON.createObjectNode();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      args.put(keysAndValues[i], keysAndValues[i + 1]);
    }
    return new ResponsePart.ToolCall("demo-" + n, tool, args.toString());
  }

  private static String lineWith(String text, String marker) {
    return text.lines().filter(l -> l.contains(marker)).findFirst().orElse("see above").strip();
  }
}
