package dev.sandbox4j.bench;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Messages;
import dev.sandbox4j.agent.Param;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.Usage;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the harness itself costs (issue 4's speed goals), without a model or a command: per tool
 * call, and (de)serializing a 200-message history. Sample-time mode, so JMH reports p50/p95/p99.
 * Run with {@code bench/jmh}.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
@State(Scope.Benchmark)
public class AgentBench {

  static final int CALLS_PER_RUN = 10;

  record EditArgs(
      @Param("path") String path,
      @Param("old text") String oldText,
      @Param("new text") String newText,
      @Param(value = "replace all", required = false) Boolean replaceAll) {}

  private Agent agent;
  private List<Message> history;
  private String historyJson;

  @Setup
  public void setUp() {
    Tool edit =
        Tool.of(
            "edit_file", "Edits a file.", EditArgs.class, (ctx, args) -> "edited " + args.path());
    List<ResponsePart> calls = new ArrayList<>();
    for (int i = 0; i < CALLS_PER_RUN; i++) {
      calls.add(
          new ResponsePart.ToolCall(
              "call-" + i,
              "edit_file",
              "{\"path\":\"src/main.py\",\"old_text\":\"return a - b\",\"new_text\":\"return a + b\"}"));
    }
    ResponseMessage toolCalls = ResponseMessage.of(calls);
    ResponseMessage done = ResponseMessage.text("done");
    agent =
        Agent.builder()
            .model(
                FunctionModel.of(
                    request ->
                        request.messages().getLast() instanceof RequestMessage r
                                && r.parts().getFirst() instanceof RequestPart.UserPrompt
                            ? toolCalls
                            : done))
            .tool(edit)
            .build();
    history = history(200);
    historyJson = Messages.toJson(history);
  }

  /** A realistic 200-message history: prompts, tool calls with code, results of 1-2 KB. */
  static List<Message> history(int size) {
    WorkspaceRef ref = new WorkspaceRef("local", "sb-0123456789abcdef");
    String code = "def add(a, b):\n    return a + b\n".repeat(30);
    List<Message> messages = new ArrayList<>();
    Instant now = Instant.parse("2026-11-29T12:00:00Z");
    messages.add(
        new RequestMessage(List.of(new RequestPart.UserPrompt("Fix the failing test.")), now));
    for (int i = 1; messages.size() < size; i++) {
      messages.add(
          new ResponseMessage(
              List.of(
                  new ResponsePart.Text("Let me look at the file " + i + "."),
                  new ResponsePart.ToolCall(
                      "toolu_" + i, "read_file", "{\"path\":\"src/mod" + i + ".py\"}")),
              new Usage(1, 1500 + i, 80, 0),
              "claude-sonnet-4-5",
              ref,
              now));
      messages.add(
          new RequestMessage(
              List.of(new RequestPart.ToolReturn("toolu_" + i, "read_file", code, false)), now));
    }
    return List.copyOf(messages.subList(0, size));
  }

  /** One run of 10 tool calls in one response; the figure is per tool call (model time ~0). */
  @Benchmark
  @OperationsPerInvocation(CALLS_PER_RUN)
  public RunResult toolCall() {
    return agent.runSync("go");
  }

  @Benchmark
  public String historyToJson() {
    return Messages.toJson(history);
  }

  @Benchmark
  public List<Message> historyFromJson() {
    return Messages.fromJson(historyJson);
  }
}
