package dev.sandbox4j.agent.tools;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** RepoContext and Coder driven through a real Agent with a function model. */
class CoderAndRepoContextTest {

  @TempDir Path root;
  HostWorkspaceProvider provider;
  final List<ModelRequest> requests = new ArrayList<>();

  @BeforeEach
  void setUp() {
    provider = HostWorkspaceProvider.create(root);
  }

  private Agent agent(
      Function<ModelRequest, ResponseMessage> model, dev.sandbox4j.agent.Capability... caps) {
    Agent.Builder b =
        Agent.builder()
            .model(
                FunctionModel.of(
                    request -> {
                      requests.add(request);
                      return model.apply(request);
                    }))
            .capability(WorkspaceCapability.of(provider));
    for (dev.sandbox4j.agent.Capability cap : caps) {
      b.capability(cap);
    }
    return b.build();
  }

  private static ResponseMessage done(ModelRequest request) {
    return ResponseMessage.text("done");
  }

  private WorkspaceBackend seeded(String name, String content) {
    WorkspaceBackend backend = provider.newBackend();
    Workspace.of(backend).writeText(name, content);
    return backend;
  }

  @Test
  void repoContextLoadsAgentsMdIntoTheInstructions() {
    WorkspaceBackend backend = seeded("AGENTS.md", "Use tabs.\nRun make test.\n");
    Workspace.of(backend).writeText("CLAUDE.md", "Be brief.\n");
    agent(CoderAndRepoContextTest::done, RepoContext.create())
        .runSync("hi", RunConfig.builder().workspace(backend).build());
    assertThat(requests.getFirst().instructions())
        .isEqualTo(
            "<context-file path=\"CLAUDE.md\">\nBe brief.\n</context-file>\n\n"
                + "<context-file path=\"AGENTS.md\">\nUse tabs.\nRun make test.\n</context-file>");
  }

  @Test
  void repoContextLoadsAFileOnceWhenBothNamesAreTheSame() {
    WorkspaceBackend backend = seeded("AGENTS.md", "Same.\n");
    Workspace.of(backend).writeText("CLAUDE.md", "Same.\n");
    agent(CoderAndRepoContextTest::done, RepoContext.create())
        .runSync("hi", RunConfig.builder().workspace(backend).build());
    assertThat(requests.getFirst().instructions())
        .isEqualTo("<context-file path=\"CLAUDE.md\">\nSame.\n</context-file>");
  }

  @Test
  void eagerRepoContextCreatesTheWorkspaceAtRunStart() {
    RunResult result = agent(CoderAndRepoContextTest::done, RepoContext.create()).runSync("hi");
    assertThat(provider.list()).hasSize(1);
    assertThat(result.workspace()).isPresent();
  }

  @Test
  void lazyRepoContextCreatesNothingAndLoadsFromAnExistingWorkspace() {
    RepoContext lazy = RepoContext.builder().lazy(true).build();
    agent(CoderAndRepoContextTest::done, lazy).runSync("hi");
    assertThat(provider.list()).isEmpty();
    assertThat(requests.getFirst().instructions()).isEmpty();

    WorkspaceBackend backend = seeded("AGENTS.md", "Lazy but loaded.\n");
    agent(CoderAndRepoContextTest::done, lazy)
        .runSync("hi", RunConfig.builder().workspace(backend.ref().orElseThrow()).build());
    assertThat(requests.getLast().instructions()).contains("Lazy but loaded.");
  }

  @Test
  void coderHasTheReferenceToolsAndGuidance() {
    Agent agent = agent(CoderAndRepoContextTest::done, Coder.builder().repoContext(false).build());
    assertThat(agent.tools().keySet())
        .containsExactlyInAnyOrder(
            "read_file",
            "write_file",
            "edit_file",
            "list_directory",
            "find_files",
            "grep",
            "shell",
            "check_command",
            "stop_command");
    agent.runSync("hi");
    assertThat(requests.getFirst().instructions()).isEqualTo(Coder.INSTRUCTIONS);
    assertThat(provider.list()).as("repoContext(false) keeps creation lazy").isEmpty();
  }

  @Test
  void coderLoadsRepoContextAfterItsGuidanceAndCreatesTheWorkspace() {
    WorkspaceBackend backend = seeded("AGENTS.md", "Project rules.\n");
    agent(CoderAndRepoContextTest::done, Coder.builder().instructions("Extra.").build())
        .runSync("hi", RunConfig.builder().workspace(backend).build());
    assertThat(requests.getFirst().instructions())
        .isEqualTo(
            Coder.INSTRUCTIONS
                + "\n\nExtra.\n\n<context-file path=\"AGENTS.md\">\nProject rules.\n</context-file>");
    requests.clear();
    agent(CoderAndRepoContextTest::done, Coder.create()).runSync("hi");
    assertThat(provider.list()).hasSize(2);
  }

  @Test
  void coderCapsEveryToolOutputAt64kCharactersKeepingBothEnds() {
    String big = "HEAD" + "x".repeat(100_000) + "TAIL";
    Tool bigTool = Tool.of("big", "Returns a lot.", NoArgs.class, (ctx, args) -> big);
    Agent agent =
        Agent.builder()
            .model(
                FunctionModel.of(
                    request ->
                        request.messages().size() == 1
                            ? ResponseMessage.toolCall("1", "big", "{}")
                            : ResponseMessage.text("done")))
            .capability(WorkspaceCapability.of(provider))
            .capability(Coder.builder().repoContext(false).build())
            .tool(bigTool)
            .build();
    RunResult result = agent.runSync("go");
    String content =
        ((RequestPart.ToolReturn) ((RequestMessage) result.allMessages().get(2)).parts().getFirst())
            .content();
    assertThat(content.length()).isLessThanOrEqualTo(Coder.MAX_OUTPUT_CHARS);
    assertThat(content).startsWith("HEAD").endsWith("TAIL");
    assertThat(content)
        .containsPattern("\\[\\.\\.\\. \\d+ chars of this tool output omitted \\.\\.\\.]");
    assertThat(
            Coder.create()
                .afterToolCall(null, new ResponsePart.ToolCall("1", "grep", "{}"), "short"))
        .isEqualTo("short");
  }

  record NoArgs() {}

  @Test
  void coderToolsWorkThroughTheAgent() {
    agent(
            request ->
                switch (request.messages().size()) {
                  case 1 ->
                      ResponseMessage.toolCall(
                          "1",
                          "write_file",
                          "{\"path\": \"hello.sh\", \"content\": \"echo hi\\n\"}");
                  case 3 ->
                      ResponseMessage.toolCall("2", "shell", "{\"command\": \"sh hello.sh\"}");
                  default -> ResponseMessage.text("done");
                },
            Coder.builder().repoContext(false).build())
        .runSync("go");
    RequestMessage last = (RequestMessage) requests.getLast().messages().getLast();
    assertThat(((RequestPart.ToolReturn) last.parts().getFirst()).content())
        .isEqualTo("[stdout]\nhi");
  }
}
