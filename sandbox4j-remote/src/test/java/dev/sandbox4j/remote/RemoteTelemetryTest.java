package dev.sandbox4j.remote;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.ContextPropagators;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.List;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * One trace across the remote client, a real server on loopback and the local engine under it, in
 * one JVM: both sides export to the same in-memory exporter of the test's own SDK (with the W3C
 * propagator), so each server span can be checked against the client span it came from.
 */
class RemoteTelemetryTest {

  private final InMemorySpanExporter spans = InMemorySpanExporter.create();
  private final OpenTelemetrySdk sdk =
      OpenTelemetrySdk.builder()
          .setTracerProvider(
              SdkTracerProvider.builder()
                  .addSpanProcessor(SimpleSpanProcessor.create(spans))
                  .build())
          .setPropagators(ContextPropagators.create(W3CTraceContextPropagator.getInstance()))
          .build();
  private final LoopbackServer server = new LoopbackServer(b -> b.openTelemetry(sdk));

  @AfterEach
  void close() {
    server.close();
    sdk.close();
  }

  @Test
  void serverAndEngineSpansContinueTheClientsTraceOverHttpAndWebSocket() {
    RemoteSandbox remote = server.client().openTelemetry(sdk).build();
    Span caller = sdk.getTracer("test").spanBuilder("caller").startSpan();
    WorkspaceRef ref;
    try (Scope ignored = caller.makeCurrent()) {
      Workspace ws = Workspace.of(remote.newBackend()).withOpenTelemetry(sdk);
      ref = ws.open();
      try {
        assertThat(ws.run(Command.argv("echo", "one")).stdoutText()).isEqualTo("one\n");
        ws.writeText("notes.txt", "two"); // HTTP
        // the second command reuses the kept-open socket: its context travels in the request
        assertThat(ws.run(Command.argv("cat", "notes.txt")).stdoutText()).isEqualTo("two");
      } finally {
        remote.destroy(ref);
      }
    } finally {
      caller.end();
    }
    String traceId = caller.getSpanContext().getTraceId();
    assertThat(spans.getFinishedSpanItems())
        .as("every span, client, server and engine, is in the caller's trace")
        .allSatisfy(s -> assertThat(s.getTraceId()).isEqualTo(traceId));

    // create: client lifecycle span -> HTTP server span -> the engine's create
    SpanData clientCreate = only(named("sandbox4j.create").and(provider("remote")));
    assertThat(clientCreate.getParentSpanId()).isEqualTo(caller.getSpanContext().getSpanId());
    SpanData post = only(named("POST /v1/sandboxes"));
    assertThat(post.getKind()).isEqualTo(SpanKind.SERVER);
    assertThat(post.getParentSpanId()).isEqualTo(clientCreate.getSpanId());
    assertThat(post.getAttributes().get(AttributeKey.longKey("http.response.status_code")))
        .isEqualTo(201);
    SpanData engineCreate = only(named("sandbox4j.create").and(provider("local")));
    assertThat(engineCreate.getParentSpanId()).isEqualTo(post.getSpanId());
    assertThat(engineCreate.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());

    // exec over the WebSocket: client exec -> server's command span -> the engine's exec
    List<SpanData> clientExecs = all(named("sandbox4j.exec").and(provider("remote")));
    List<SpanData> commands = all(named("WS /v1/sandboxes/{id}/exec"));
    List<SpanData> engineExecs = all(named("sandbox4j.exec").and(provider("local")));
    assertThat(clientExecs).hasSize(2);
    assertThat(commands).hasSize(2);
    assertThat(engineExecs).hasSize(2);
    for (int i = 0; i < 2; i++) {
      SpanData clientExec = clientExecs.get(i);
      SpanData command =
          only(
              s ->
                  s.getName().startsWith("WS ")
                      && s.getParentSpanId().equals(clientExec.getSpanId()));
      assertThat(command.getKind()).isEqualTo(SpanKind.SERVER);
      SpanData engineExec = only(s -> s.getParentSpanId().equals(command.getSpanId()));
      assertThat(engineExec.getName()).isEqualTo("sandbox4j.exec");
      assertThat(engineExec.getAttributes().get(AttributeKey.stringKey("process.command")))
          .isEqualTo(i == 0 ? "echo" : "cat");
      assertThat(engineExec.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());
    }

    // a file write over HTTP: client file span -> server span -> the engine's file span
    SpanData clientWrite = only(named("sandbox4j.file.write").and(provider("remote")));
    SpanData put =
        only(
            s ->
                s.getKind() == SpanKind.SERVER
                    && s.getParentSpanId().equals(clientWrite.getSpanId()));
    assertThat(only(named("sandbox4j.file.write").and(provider("local"))).getParentSpanId())
        .isEqualTo(put.getSpanId());
  }

  private static Predicate<SpanData> named(String name) {
    return s -> s.getName().equals(name);
  }

  private static Predicate<SpanData> provider(String provider) {
    return s -> provider.equals(s.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER));
  }

  private List<SpanData> all(Predicate<SpanData> which) {
    return spans.getFinishedSpanItems().stream()
        .filter(which)
        .sorted(java.util.Comparator.comparingLong(SpanData::getStartEpochNanos))
        .toList();
  }

  private SpanData only(Predicate<SpanData> which) {
    List<SpanData> found = all(which);
    assertThat(found).as("one matching span among %s", spans.getFinishedSpanItems()).hasSize(1);
    return found.getFirst();
  }
}
