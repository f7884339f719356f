package dev.sandbox4j.agent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A run's trace, on an SDK of the test's own with the in-memory exporter, on host workspaces. */
class AgentTelemetryTest {

  private static final String SECRET = "s3cr3t-never-in-a-span";

  private final InMemorySpanExporter spans = InMemorySpanExporter.create();
  private final OpenTelemetrySdk sdk =
      OpenTelemetrySdk.builder()
          .setTracerProvider(
              SdkTracerProvider.builder()
                  .addSpanProcessor(SimpleSpanProcessor.create(spans))
                  .build())
          .build();

  @TempDir Path root;

  @AfterEach
  void close() {
    sdk.close();
  }

  private Agent agent(Model model) {
    return Agent.builder()
        .model(model)
        .capability(WorkspaceCapability.of(HostWorkspaceProvider.create(root)))
        .tool(TestTools.WRITE)
        .tool(TestTools.READ)
        .tool(TestTools.SH)
        .openTelemetry(sdk)
        .build();
  }

  /** Each response in turn, with 10 input and 4 output tokens, as model {@code anthropic:...}. */
  private static Model scripted(ResponseMessage... responses) {
    AtomicInteger next = new AtomicInteger();
    return FunctionModel.of(
        "anthropic:claude-test",
        request ->
            responses[Math.min(next.getAndIncrement(), responses.length - 1)].withUsage(
                Usage.ofTokens(10, 4), "anthropic:claude-test"));
  }

  @Test
  void aRunIsOneTreeUnderTheCallersSpan() {
    Agent agent =
        agent(
            scripted(
                ResponseMessage.toolCall(
                    "c1", "put", "{\"path\":\"a.txt\",\"text\":\"" + SECRET + "\"}"),
                ResponseMessage.toolCall(
                    "c2", "sh", "{\"command\":\"echo " + SECRET + " > /dev/null\"}"),
                ResponseMessage.text("done")));
    Span caller = sdk.getTracer("test").spanBuilder("caller").startSpan();
    RunResult result;
    try (Scope ignored = caller.makeCurrent()) {
      result = agent.runSync("please keep " + SECRET);
    } finally {
      caller.end();
    }
    WorkspaceRef ref = result.workspace().orElseThrow();

    SpanData run = only("invoke_agent");
    assertThat(run.getParentSpanId()).isEqualTo(caller.getSpanContext().getSpanId());
    assertThat(run.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER)).isEqualTo("host");
    assertThat(run.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());
    assertThat(run.getAttributes().get(AttributeKey.longKey("gen_ai.usage.input_tokens")))
        .isEqualTo(30);

    List<SpanData> chats = named("chat claude-test");
    assertThat(chats)
        .hasSize(3)
        .allSatisfy(c -> assertThat(c.getParentSpanId()).isEqualTo(run.getSpanId()));
    SpanData first = chats.getFirst();
    assertThat(first.getKind()).isEqualTo(SpanKind.CLIENT);
    assertThat(first.getAttributes().get(AttributeKey.stringKey("gen_ai.operation.name")))
        .isEqualTo("chat");
    assertThat(first.getAttributes().get(AttributeKey.stringKey("gen_ai.provider.name")))
        .isEqualTo("anthropic");
    assertThat(first.getAttributes().get(AttributeKey.stringKey("gen_ai.request.model")))
        .isEqualTo("claude-test");
    assertThat(first.getAttributes().get(AttributeKey.longKey("gen_ai.usage.output_tokens")))
        .isEqualTo(4);
    assertThat(
            first
                .getAttributes()
                .get(AttributeKey.stringArrayKey("gen_ai.response.finish_reasons")))
        .containsExactly("tool_calls");
    assertThat(
            chats
                .getLast()
                .getAttributes()
                .get(AttributeKey.stringArrayKey("gen_ai.response.finish_reasons")))
        .containsExactly("stop");

    SpanData put = only("execute_tool put");
    assertThat(put.getParentSpanId()).isEqualTo(run.getSpanId());
    assertThat(put.getAttributes().get(AttributeKey.stringKey("gen_ai.tool.name")))
        .isEqualTo("put");
    assertThat(put.getAttributes().get(AttributeKey.stringKey("gen_ai.tool.call.id")))
        .isEqualTo("c1");
    assertThat(put.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());
    SpanData write = only("sandbox4j.file.write");
    assertThat(write.getParentSpanId()).isEqualTo(put.getSpanId());
    assertThat(write.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());

    SpanData sh = only("execute_tool sh");
    SpanData exec = only("sandbox4j.exec");
    assertThat(exec.getParentSpanId()).isEqualTo(sh.getSpanId());
    assertThat(exec.getAttributes().get(AttributeKey.longKey("process.exit.code"))).isEqualTo(0);
    assertThat(exec.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER)).isEqualTo("host");

    assertThat(spans.getFinishedSpanItems())
        .allSatisfy(
            s -> assertThat(s.getTraceId()).isEqualTo(caller.getSpanContext().getTraceId()));
    assertNoSecretRecorded();
  }

  @Test
  void aFailedToolCallIsAnErrorOnItsSpanWhileTheRunGoesOn() {
    Agent agent =
        agent(
            scripted(
                ResponseMessage.toolCall("c1", "get", "{\"path\":\"missing.txt\"}"),
                ResponseMessage.text("no such file")));
    assertThat(agent.runSync("read it").output()).isEqualTo("no such file");
    SpanData get = only("execute_tool get");
    assertThat(get.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(get.getAttributes().get(SandboxTelemetry.ERROR_TYPE))
        .isEqualTo(WorkspaceNoSuchFileException.class.getName());
    assertThat(only("sandbox4j.file.read").getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(only("invoke_agent").getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
  }

  @Test
  void aFailuresMessageIsNeverRecorded() {
    Agent agent =
        Agent.builder()
            .model(
                scripted(
                    ResponseMessage.toolCall("c1", "leaky", "{\"path\":\"a.txt\"}"),
                    ResponseMessage.text("ok")))
            .tool(
                Tool.of(
                    "leaky",
                    "Fails quoting a secret.",
                    TestTools.PathOnly.class,
                    (ctx, args) -> {
                      throw new IllegalStateException("line 3 of the file reads " + SECRET);
                    }))
            .openTelemetry(sdk)
            .build();
    assertThat(agent.runSync("go").output()).isEqualTo("ok");
    SpanData leaky = only("execute_tool leaky");
    assertThat(leaky.getAttributes().get(SandboxTelemetry.ERROR_TYPE))
        .isEqualTo(IllegalStateException.class.getName());
    assertThat(leaky.getEvents()).extracting(EventData::getName).containsExactly("exception");
    assertNoSecretRecorded();
  }

  @Test
  void aFailedModelRequestFailsTheChatAndTheRunSpan() {
    Agent agent =
        agent(
            FunctionModel.of(
                "openai:gpt-test",
                request -> {
                  throw new ModelException("the provider answered 503");
                }));
    assertThatThrownBy(() -> agent.runSync("hi")).isInstanceOf(ModelException.class);
    SpanData chat = only("chat gpt-test");
    assertThat(chat.getAttributes().get(SandboxTelemetry.ERROR_TYPE))
        .isEqualTo(ModelException.class.getName());
    assertThat(chat.getEvents()).extracting(EventData::getName).containsExactly("exception");
    SpanData run = only("invoke_agent");
    assertThat(run.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(run.getAttributes().get(SandboxTelemetry.ERROR_TYPE))
        .isEqualTo(ModelException.class.getName());
  }

  @Test
  void anAsynchronousRunKeepsTheParentItWasStartedUnder() throws Exception {
    Agent agent = agent(scripted(ResponseMessage.text("done")));
    Span caller = sdk.getTracer("test").spanBuilder("caller").startSpan();
    try (Scope ignored = caller.makeCurrent()) {
      agent.run("hi").get(10, TimeUnit.SECONDS);
    } finally {
      caller.end();
    }
    assertThat(only("invoke_agent").getParentSpanId())
        .isEqualTo(caller.getSpanContext().getSpanId());
  }

  private void assertNoSecretRecorded() {
    for (SpanData span : spans.getFinishedSpanItems()) {
      assertThat(span.getName()).doesNotContain(SECRET);
      span.getAttributes()
          .forEach((key, value) -> assertThat(String.valueOf(value)).doesNotContain(SECRET));
      for (EventData event : span.getEvents()) {
        event
            .getAttributes()
            .forEach((key, value) -> assertThat(String.valueOf(value)).doesNotContain(SECRET));
      }
    }
  }

  private List<SpanData> named(String name) {
    return spans.getFinishedSpanItems().stream().filter(s -> s.getName().equals(name)).toList();
  }

  private SpanData only(String name) {
    List<SpanData> found = named(name);
    assertThat(found).as("spans named %s among %s", name, spans.getFinishedSpanItems()).hasSize(1);
    return found.getFirst();
  }
}
