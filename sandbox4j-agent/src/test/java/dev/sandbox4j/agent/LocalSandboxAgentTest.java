package dev.sandbox4j.agent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Agent runs in real local sandboxes: the harness and the engine together. */
class LocalSandboxAgentTest {

  private static final LocalSandbox SANDBOXES =
      LocalSandbox.builder().label("test", "agent").build();
  private final List<WorkspaceRef> created = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void requireEngine() {
    LocalEngine.require();
  }

  @AfterEach
  void destroyCreated() {
    created.forEach(SANDBOXES::destroy);
  }

  private Agent agent(Model model, Capability... more) {
    Agent.Builder builder =
        Agent.builder()
            .model(model)
            .capability(WorkspaceCapability.of(SANDBOXES))
            .tool(TestTools.WRITE)
            .tool(TestTools.READ)
            .tool(TestTools.SH);
    for (Capability capability : more) {
      builder.capability(capability);
    }
    return builder.build();
  }

  private RunResult track(RunResult result) {
    result.workspace().ifPresent(created::add);
    return result;
  }

  @Test
  void aFollowUpRunWithHistoryFindsTheFirstRunsFilesInTheSameSandbox() {
    RunResult first =
        track(
            agent(
                    TestTools.scripted(
                        "put", "{\"path\":\"notes.txt\",\"text\":\"from run one\"}",
                        "sh", "{\"command\":\"hostname\"}"))
                .runSync("write"));
    WorkspaceRef ref = first.workspace().orElseThrow();
    assertThat(ref.provider()).isEqualTo("local");

    List<String> results = new CopyOnWriteArrayList<>();
    Agent reader =
        agent(TestTools.scripted("sh", "{\"command\":\"cat notes.txt; hostname; id -un\"}"));
    RunResult second =
        reader.runStreaming(
            "read",
            RunConfig.continuing(Messages.fromJson(Messages.toJson(first.allMessages()))),
            event -> {
              if (event instanceof AgentEvent.ToolCallFinished finished) {
                results.add(finished.result());
              }
            });
    assertThat(second.workspace()).contains(ref);
    assertThat(results).containsExactly("from run one" + ref.id() + "\nsandbox\n[exit 0]");
  }

  @Test
  void theCapabilityGivesTheEnginesOwnOperationsSuchAsFork() {
    WorkspaceCapability<LocalSandbox> sandboxes = WorkspaceCapability.of(SANDBOXES);
    RunResult first =
        track(
            agent(TestTools.scripted("put", "{\"path\":\"f\",\"text\":\"parent\"}"))
                .runSync("write"));
    WorkspaceRef fork = sandboxes.provider().fork(first.workspace().orElseThrow()).ref();
    created.add(fork);

    List<String> results = new CopyOnWriteArrayList<>();
    RunResult second =
        Agent.builder()
            .model(TestTools.scripted("sh", "{\"command\":\"cat f; hostname\"}"))
            .capability(sandboxes)
            .tool(TestTools.SH)
            .build()
            .runStreaming(
                "read",
                RunConfig.builder().workspace(fork).build(),
                event -> {
                  if (event instanceof AgentEvent.ToolCallFinished finished) {
                    results.add(finished.result());
                  }
                });
    assertThat(second.workspace()).contains(fork);
    assertThat(results).containsExactly("parent" + fork.id() + "\n[exit 0]");
  }

  @Test
  void newGivesAFreshMachineEvenWhenHistoryNamesOne() {
    RunResult first =
        track(agent(TestTools.scripted("put", "{\"path\":\"f\",\"text\":\"x\"}")).runSync("write"));
    List<String> results = new CopyOnWriteArrayList<>();
    RunResult fresh =
        track(
            agent(TestTools.scripted("sh", "{\"command\":\"ls f || echo absent\"}"))
                .runStreaming(
                    "look",
                    RunConfig.builder().messageHistory(first.allMessages()).newWorkspace().build(),
                    event -> {
                      if (event instanceof AgentEvent.ToolCallFinished finished) {
                        results.add(finished.result());
                      }
                    }));
    assertThat(fresh.workspace()).isPresent().isNotEqualTo(first.workspace());
    assertThat(results.getFirst()).contains("absent");
  }

  @Test
  void aDestroyedSandboxFailsTheRunWithUnavailableInsteadOfAnEmptyOne() {
    RunResult first =
        track(agent(TestTools.scripted("put", "{\"path\":\"f\",\"text\":\"x\"}")).runSync("write"));
    SANDBOXES.destroy(first.workspace().orElseThrow());
    int before = SANDBOXES.list().size();
    assertThatThrownBy(
            () ->
                agent(TestTools.scripted("get", "{\"path\":\"f\"}"))
                    .runSync("read", RunConfig.continuing(first.allMessages())))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThat(SANDBOXES.list()).hasSize(before);
  }

  @Test
  void onRunErrorCanDestroyTheSandboxOfAFailedRunAndAfterRunIsNotCalled() {
    List<String> calls = new CopyOnWriteArrayList<>();
    List<WorkspaceRef> destroyed = new CopyOnWriteArrayList<>();
    Hooks cleanup =
        Hooks.builder()
            .afterRun((run, result) -> calls.add("afterRun"))
            .onRunError(
                (run, error) -> {
                  calls.add("onRunError");
                  run.workspaceRef()
                      .ifPresent(
                          ref -> {
                            SANDBOXES.destroy(ref);
                            destroyed.add(ref);
                          });
                  throw error;
                })
            .build();
    int[] n = {0};
    Model failsAfterCreating =
        TestTools.function(
            request -> {
              if (n[0]++ == 0) {
                return ResponseMessage.toolCall("c", "sh", "{\"command\":\"true\"}");
              }
              throw new ModelException("provider went away");
            });
    assertThatThrownBy(() -> agent(failsAfterCreating, cleanup).runSync("go"))
        .isInstanceOf(ModelException.class);
    assertThat(calls).containsExactly("onRunError");
    assertThat(destroyed).hasSize(1);
    assertThat(SANDBOXES.list()).noneMatch(info -> info.ref().equals(destroyed.getFirst()));
  }

  @Test
  void creatingASandboxIsLoggedAtInfo() {
    List<LogRecord> records = new CopyOnWriteArrayList<>();
    Logger logger = Logger.getLogger(WorkspaceSession.class.getName());
    Handler handler =
        new Handler() {
          @Override
          public void publish(LogRecord record) {
            records.add(record);
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    logger.addHandler(handler);
    try {
      RunResult result =
          track(agent(TestTools.scripted("sh", "{\"command\":\"true\"}")).runSync("go"));
      WorkspaceRef ref = result.workspace().orElseThrow();
      assertThat(records)
          .anySatisfy(
              r -> {
                assertThat(r.getLevel()).isEqualTo(java.util.logging.Level.INFO);
                assertThat(java.text.MessageFormat.format(r.getMessage(), r.getParameters()))
                    .isEqualTo("Created local sandbox " + ref.id());
              });
    } finally {
      logger.removeHandler(handler);
    }
  }
}
