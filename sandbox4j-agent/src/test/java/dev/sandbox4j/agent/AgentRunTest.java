package dev.sandbox4j.agent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The run loop on host-directory workspaces: fast, and the same code path as any backend. */
class AgentRunTest {

  @TempDir Path root;

  private WorkspaceCapability hostWorkspaces() {
    return WorkspaceCapability.of(HostWorkspaceProvider.create(root));
  }

  private Agent.Builder agent(Model model) {
    return Agent.builder()
        .model(model)
        .capability(hostWorkspaces())
        .tool(TestTools.WRITE)
        .tool(TestTools.READ)
        .tool(TestTools.SH);
  }

  @Test
  void toolCallsRunInTheWorkspaceAndTheirResultsGoBackToTheModel() {
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Model model =
        TestTools.function(
            request -> {
              seen.add(request);
              return switch (seen.size()) {
                case 1 ->
                    ResponseMessage.toolCall("c1", "put", "{\"path\":\"a.txt\",\"text\":\"hi\"}");
                case 2 -> ResponseMessage.toolCall("c2", "get", "{\"path\":\"a.txt\"}");
                default -> ResponseMessage.text("the file says hi");
              };
            });
    RunResult result = agent(model).instructions("Be brief.").build().runSync("write and read");

    assertThat(result.output()).isEqualTo("the file says hi");
    assertThat(seen.getFirst().instructions()).isEqualTo("Be brief.");
    assertThat(seen.getFirst().tools())
        .extracting(ToolDefinition::name)
        .containsExactlyInAnyOrder("put", "get", "sh");
    assertThat(TestTools.lastParts(seen.get(2)))
        .containsExactly(new RequestPart.ToolReturn("c2", "get", "hi", false));
    assertThat(result.usage()).isEqualTo(new Usage(3, 0, 0, 2));
    assertThat(result.newMessages()).hasSize(6);
    WorkspaceRef ref = result.workspace().orElseThrow();
    assertThat(ref.provider()).isEqualTo(HostWorkspaceProvider.NAME);
    // the response whose tool created the workspace records it, and every later one does
    List<ResponseMessage> responses =
        result.newMessages().stream()
            .filter(ResponseMessage.class::isInstance)
            .map(ResponseMessage.class::cast)
            .toList();
    assertThat(responses).allSatisfy(r -> assertThat(r.workspace()).isEqualTo(ref));
    assertThat(responses).allSatisfy(r -> assertThat(r.modelName()).isEqualTo("function"));
  }

  @Test
  void aRunWithoutToolCallsCreatesNoWorkspace() {
    RunResult result = agent(TestTools.scripted()).build().runSync("hello");
    assertThat(result.output()).isEqualTo("done");
    assertThat(result.workspace()).isEmpty();
  }

  @Test
  void invalidArgumentsGoBackAsARetryPromptNamingEachProblem() {
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Model model =
        TestTools.function(
            request -> {
              seen.add(request);
              return seen.size() == 1
                  ? ResponseMessage.toolCall("c1", "put", "{\"path\": 3, \"extra\": true}")
                  : ResponseMessage.text("ok");
            });
    agent(model).build().runSync("go");

    RequestPart part = TestTools.lastParts(seen.get(1)).getFirst();
    assertThat(part).isInstanceOf(RequestPart.RetryPrompt.class);
    String message = ((RequestPart.RetryPrompt) part).content();
    assertThat(message)
        .contains("`path`: expected a string, got a number (3)")
        .contains("`text`: required, missing")
        .contains("`extra`: unknown argument (known: path, text)");
  }

  @Test
  void anUnknownToolIsARetryListingTheTools() {
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Model model =
        TestTools.function(
            request -> {
              seen.add(request);
              return seen.size() == 1
                  ? ResponseMessage.toolCall("c1", "delete_everything", "{}")
                  : ResponseMessage.text("ok");
            });
    agent(model).build().runSync("go");
    assertThat(((RequestPart.RetryPrompt) TestTools.lastParts(seen.get(1)).getFirst()).content())
        .isEqualTo("There is no tool named `delete_everything`. The tools are: get, put, sh.");
  }

  @Test
  void retriesAreBoundedPerTool() {
    Model model = TestTools.function(request -> ResponseMessage.toolCall("c", "put", "{}"));
    assertThatThrownBy(() -> agent(model).build().runSync("go"))
        .isInstanceOf(UnexpectedModelBehaviorException.class)
        .hasMessageContaining("tool `put` exceeded its 3 retries in a row")
        .hasMessageContaining("`path`: required, missing");
  }

  @Test
  void aCallThatReturnsResetsTheRetryCount() {
    String bad = "{}";
    String good = "{\"path\":\"f\",\"text\":\"t\"}";
    Model model =
        TestTools.scripted(
            "put", bad, "put", bad, "put", bad, "put", good, "put", bad, "put", bad, "put", bad);
    assertThat(agent(model).build().runSync("go").output()).isEqualTo("done");
  }

  @Test
  void aFailingToolBecomesAnErrorResultTheModelReads() {
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Model model =
        TestTools.function(
            request -> {
              seen.add(request);
              return seen.size() == 1
                  ? ResponseMessage.toolCall("c1", "get", "{\"path\":\"missing.txt\"}")
                  : ResponseMessage.text("ok");
            });
    agent(model).build().runSync("go");
    RequestPart.ToolReturn result =
        (RequestPart.ToolReturn) TestTools.lastParts(seen.get(1)).getFirst();
    assertThat(result.error()).isTrue();
    assertThat(result.content()).startsWith("Error: ").contains("missing.txt");
  }

  @Test
  void limitsOnRequestsAndToolCallsStopTheRun() {
    Model loop =
        TestTools.function(
            request -> ResponseMessage.toolCall("c", "sh", "{\"command\":\"true\"}"));
    assertThatThrownBy(() -> agent(loop).maxRequests(3).build().runSync("go"))
        .isInstanceOf(UsageLimitExceededException.class)
        .hasMessage("the run reached its limit of 3 model requests");
    assertThatThrownBy(
            () -> agent(loop).build().runSync("go", RunConfig.builder().maxToolCalls(2).build()))
        .isInstanceOf(UsageLimitExceededException.class)
        .hasMessage("the run reached its limit of 2 tool calls");
  }

  @Test
  void hooksRunInOrderAndAfterRunIsSkippedWhenTheRunFails() {
    List<String> calls = new CopyOnWriteArrayList<>();
    Hooks hooks =
        Hooks.builder()
            .beforeRun(run -> calls.add("beforeRun"))
            .beforeToolCall((run, call) -> calls.add("beforeTool " + call.toolName()))
            .afterToolCall(
                (run, call, output) -> {
                  calls.add("afterTool " + output);
                  return output.toUpperCase();
                })
            .afterRun((run, result) -> calls.add("afterRun " + result.output()))
            .onRunError(
                (run, error) -> {
                  calls.add("onRunError " + error.getMessage());
                  throw error;
                })
            .build();
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Model model =
        TestTools.function(
            request -> {
              seen.add(request);
              return seen.size() == 1
                  ? ResponseMessage.toolCall("c1", "sh", "{\"command\":\"echo hi\"}")
                  : ResponseMessage.text("ok");
            });
    agent(model).capability(hooks).build().runSync("go");
    assertThat(calls)
        .containsExactly("beforeRun", "beforeTool sh", "afterTool hi\n[exit 0]", "afterRun ok");
    assertThat(((RequestPart.ToolReturn) TestTools.lastParts(seen.get(1)).getFirst()).content())
        .isEqualTo("HI\n[EXIT 0]");

    calls.clear();
    Model broken =
        TestTools.function(
            request -> {
              throw new ModelException("provider down");
            });
    assertThatThrownBy(() -> agent(broken).capability(hooks).build().runSync("go"))
        .isInstanceOf(ModelException.class)
        .hasMessage("provider down");
    assertThat(calls).containsExactly("beforeRun", "onRunError provider down");
  }

  @Test
  void onRunErrorCanRecoverWithAResultWhichAfterRunThenSees() {
    List<String> seen = new CopyOnWriteArrayList<>();
    Hooks recover =
        Hooks.builder()
            .onRunError(
                (run, error) ->
                    new RunResult("recovered", run.messages(), List.of(), run.usage(), null))
            .afterRun((run, result) -> seen.add("afterRun " + result.output()))
            .build();
    Model broken =
        TestTools.function(
            request -> {
              throw new ModelException("provider down");
            });
    assertThat(agent(broken).capability(recover).build().runSync("go").output())
        .isEqualTo("recovered");
    assertThat(seen).containsExactly("afterRun recovered");
  }

  @Test
  void eventsArriveInOrder() {
    List<AgentEvent> events = new ArrayList<>();
    Model model = TestTools.scripted("sh", "{\"command\":\"echo out; echo err >&2\"}");
    agent(model).build().runStreaming("go", RunConfig.defaults(), events::add);
    assertThat(events)
        .extracting(e -> e.getClass().getSimpleName())
        .containsExactly(
            "ModelResponded",
            "ToolCallStarted",
            "WorkspaceCreated",
            "ToolCallFinished",
            "TextDelta",
            "ModelResponded");
    assertThat(events.get(3))
        .isEqualTo(
            new AgentEvent.ToolCallFinished(
                "call-0", "sh", "out\nerr\n[exit 0]", AgentEvent.Outcome.RETURNED));
  }

  /**
   * An application sees the ref while the first command still runs: here the listener releases a
   * command that waits for a file, which it can only do if WorkspaceCreated arrives before the call
   * ends.
   */
  @Test
  void workspaceCreatedArrivesWhileTheFirstToolCallStillRuns() {
    String waitForRelease =
        "for i in $(seq 200); do [ -e released ] && { echo released; exit 0; }; sleep 0.05; done;"
            + " echo never-released";
    Model model =
        TestTools.scripted("sh", "{\"command\":\"" + waitForRelease.replace("\"", "\\\"") + "\"}");
    List<AgentEvent> events = new CopyOnWriteArrayList<>();
    RunResult result =
        agent(model)
            .build()
            .runStreaming(
                "go",
                RunConfig.defaults(),
                event -> {
                  events.add(event);
                  if (event instanceof AgentEvent.WorkspaceCreated(WorkspaceRef ref)) {
                    dev.sandbox4j.workspace.Workspace.of(
                            HostWorkspaceProvider.create(root).backend(ref).orElseThrow())
                        .writeText("released", "");
                  }
                });
    assertThat(events)
        .filteredOn(e -> e instanceof AgentEvent.ToolCallFinished)
        .singleElement()
        .extracting(e -> ((AgentEvent.ToolCallFinished) e).result())
        .isEqualTo("released\n[exit 0]");
    assertThat(result.workspace()).isPresent();
  }

  @Test
  void historyContinuesInTheSameWorkspaceAndNewStartsAFreshOne() {
    Agent writer = agent(TestTools.scripted("put", "{\"path\":\"f\",\"text\":\"one\"}")).build();
    RunResult first = writer.runSync("write");
    WorkspaceRef ref = first.workspace().orElseThrow();

    Agent reader = agent(TestTools.scripted("get", "{\"path\":\"f\"}")).build();
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Agent spying =
        agent(
                TestTools.function(
                    request -> {
                      seen.add(request);
                      return seen.size() == 1
                          ? ResponseMessage.toolCall("c", "get", "{\"path\":\"f\"}")
                          : ResponseMessage.text("read");
                    }))
            .build();
    RunResult second = spying.runSync("read", RunConfig.continuing(first.allMessages()));
    assertThat(second.workspace()).contains(ref);
    assertThat(((RequestPart.ToolReturn) TestTools.lastParts(seen.get(1)).getFirst()).content())
        .isEqualTo("one");
    assertThat(second.allMessages()).startsWith(first.allMessages().toArray(Message[]::new));

    RunResult fresh =
        reader.runSync(
            "read", RunConfig.builder().messageHistory(first.allMessages()).newWorkspace().build());
    assertThat(fresh.workspace()).isPresent().isNotEqualTo(java.util.Optional.of(ref));
  }

  @Test
  void aRefOfAProviderNoCapabilityHandlesIsAClearErrorBeforeAnyModelRequest() {
    List<ModelRequest> seen = new CopyOnWriteArrayList<>();
    Agent agent =
        agent(
                TestTools.function(
                    request -> {
                      seen.add(request);
                      return ResponseMessage.text("no");
                    }))
            .build();
    assertThatThrownBy(
            () ->
                agent.runSync(
                    "go",
                    RunConfig.builder().workspace(new WorkspaceRef("modal", "sb-123")).build()))
        .isInstanceOf(AgentException.class)
        .hasMessage(
            "workspace modal:sb-123 belongs to provider 'modal', but no capability of this agent"
                + " handles it (it handles 'host'); add WorkspaceCapability.of(<a modal"
                + " provider>)");
    assertThat(seen).isEmpty();
  }

  @Test
  void aRunWithNoWorkspaceToUseSaysHowToGetOne() {
    Agent agent =
        Agent.builder()
            .model(TestTools.scripted("get", "{\"path\":\"f\"}"))
            .tool(TestTools.READ)
            .build();
    assertThatThrownBy(() -> agent.runSync("go"))
        .isInstanceOf(AgentException.class)
        .hasMessageContaining("this run has no workspace");
  }

  @Test
  void aDestroyedWorkspaceFailsTheRunWithUnavailable() {
    WorkspaceCapability workspaces = hostWorkspaces();
    Agent writer = agent(TestTools.scripted("put", "{\"path\":\"f\",\"text\":\"one\"}")).build();
    RunResult first = writer.runSync("write");
    workspaces.destroy(first.workspace().orElseThrow());

    Agent reader = agent(TestTools.scripted("get", "{\"path\":\"f\"}")).build();
    assertThatThrownBy(() -> reader.runSync("read", RunConfig.continuing(first.allMessages())))
        .isInstanceOf(dev.sandbox4j.workspace.WorkspaceUnavailableException.class);
  }

  @Test
  void cancellingARunKillsItsRunningCommand() throws Exception {
    Path shellPid = root.resolve("cancel-shell.pid");
    Path sleepPid = root.resolve("cancel-sleep.pid");
    Agent agent =
        agent(
                TestTools.scripted(
                    "sh",
                    "{\"command\":\"echo $$ > "
                        + shellPid
                        + ".tmp && mv "
                        + shellPid
                        + ".tmp "
                        + shellPid
                        + "; sleep 600 & echo $! > "
                        + sleepPid
                        + ".tmp && mv "
                        + sleepPid
                        + ".tmp "
                        + sleepPid
                        + "; wait\"}"))
            .build();
    CompletableFuture<RunResult> run = agent.run("go");
    // Cancel once the command runs (both of its processes exist), not at some guessed moment.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!Files.exists(shellPid) || !Files.exists(sleepPid)) {
      assertThat(System.nanoTime()).as("the command started").isLessThan(deadline);
      assertThat(run).as("the run is still going").isNotDone();
      Thread.sleep(10);
    }
    List<ProcessHandle> processes = new ArrayList<>();
    for (Path pid : List.of(shellPid, sleepPid)) {
      ProcessHandle.of(Long.parseLong(Files.readString(pid).strip())).ifPresent(processes::add);
    }
    assertThat(processes).as("the command's shell and its sleep 600 run").hasSize(2);

    assertThat(run.cancel(true)).isTrue();
    assertThatThrownBy(run::get).isInstanceOf(CancellationException.class);
    // Killed: each exits long before its 600 s (a generous bound for a loaded machine).
    for (ProcessHandle p : processes) {
      assertThat(p.onExit().completeOnTimeout(null, 60, TimeUnit.SECONDS).get())
          .as("process " + p.pid() + " of the cancelled command was killed")
          .isNotNull();
    }
  }

  @Test
  void aRunOnAnotherThreadReturnsItsResult() throws Exception {
    CompletableFuture<RunResult> run = agent(TestTools.scripted()).build().run("go");
    assertThat(run.get(10, TimeUnit.SECONDS).output()).isEqualTo("done");
    CompletableFuture<RunResult> failing =
        agent(
                TestTools.function(
                    request -> {
                      throw new ModelException("down");
                    }))
            .build()
            .run("go");
    assertThatThrownBy(() -> failing.get(10, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .hasCauseInstanceOf(ModelException.class);
  }

  @Test
  void twoToolsWithOneNameAreRefused() {
    assertThatThrownBy(() -> agent(TestTools.scripted()).tool(TestTools.READ).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("two tools are named 'get'");
  }

  @Test
  void theHostWorkspaceIsWhereFilesLand() throws Exception {
    RunResult result =
        agent(TestTools.scripted("put", "{\"path\":\"x/y.txt\",\"text\":\"z\"}"))
            .build()
            .runSync("go");
    String id = result.workspace().orElseThrow().id();
    try (var files = Files.walk(root)) {
      assertThat(files.filter(p -> p.endsWith("x/y.txt")).toList())
          .singleElement()
          .satisfies(p -> assertThat(p.toString()).contains(id));
    }
  }
}
