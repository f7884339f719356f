package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.HistogramPointData;
import io.opentelemetry.sdk.metrics.data.LongPointData;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Workspace operations traced and measured through an SDK of the test's own (never the global one),
 * on the host backend.
 */
class WorkspaceTelemetryTest {

  private static final String SECRET = "s3cr3t-value-never-recorded";

  private final InMemorySpanExporter spans = InMemorySpanExporter.create();
  private final InMemoryMetricReader metrics = InMemoryMetricReader.create();
  private final OpenTelemetrySdk sdk =
      OpenTelemetrySdk.builder()
          .setTracerProvider(
              SdkTracerProvider.builder()
                  .addSpanProcessor(SimpleSpanProcessor.create(spans))
                  .build())
          .setMeterProvider(SdkMeterProvider.builder().registerMetricReader(metrics).build())
          .build();

  @TempDir Path root;

  @AfterEach
  void close() {
    sdk.close();
  }

  private Workspace workspace() {
    return Workspace.of(HostWorkspaceProvider.create(root).newBackend()).withOpenTelemetry(sdk);
  }

  @Test
  void execSpanIsAChildOfTheCallersSpanWithProgramExitCodeAndWorkspace() {
    Workspace ws = workspace();
    Span parent = sdk.getTracer("test").spanBuilder("caller").startSpan();
    try (Scope ignored = parent.makeCurrent()) {
      CommandResult result =
          ws.run(
              Command.argv("sh", "-c", "echo " + SECRET + "; exit 3"),
              RunOptions.builder().env("TOKEN", SECRET).build());
      assertThat(result.exitCode()).isEqualTo(3);
    } finally {
      parent.end();
    }
    SpanData exec = only("sandbox4j.exec");
    assertThat(exec.getParentSpanId()).isEqualTo(parent.getSpanContext().getSpanId());
    assertThat(exec.getTraceId()).isEqualTo(parent.getSpanContext().getTraceId());
    assertThat(exec.getAttributes().get(AttributeKey.stringKey("process.command"))).isEqualTo("sh");
    assertThat(exec.getAttributes().get(AttributeKey.longKey("process.exit.code"))).isEqualTo(3);
    WorkspaceRef ref = ws.ref().orElseThrow();
    assertThat(exec.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER)).isEqualTo("host");
    assertThat(exec.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());
    // a non-zero exit is a result, not an error
    assertThat(exec.getStatus().getStatusCode()).isEqualTo(StatusCode.UNSET);
    assertNoSecretRecorded();
  }

  @Test
  void fileSpansCarryThePathButNeverTheContents() {
    Workspace ws = workspace();
    ws.writeText("notes/a.txt", SECRET);
    assertThat(ws.readText("notes/a.txt")).isEqualTo(SECRET);
    ws.rename("notes/a.txt", "notes/b.txt");
    assertThat(ws.list("notes")).hasSize(1);
    String dir = ws.workingDirectory();
    assertThat(
            only("sandbox4j.file.write").getAttributes().get(AttributeKey.stringKey("file.path")))
        .isEqualTo(dir + "/notes/a.txt");
    assertThat(only("sandbox4j.file.read").getAttributes().get(AttributeKey.stringKey("file.path")))
        .isEqualTo(dir + "/notes/a.txt");
    SpanData rename = only("sandbox4j.file.rename");
    assertThat(rename.getAttributes().get(AttributeKey.stringKey("sandbox4j.file.target_path")))
        .isEqualTo(dir + "/notes/b.txt");
    assertThat(rename.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER)).isEqualTo("host");
    assertThat(only("sandbox4j.file.list").getAttributes().get(SandboxTelemetry.WORKSPACE_ID))
        .isEqualTo(ws.ref().orElseThrow().id());
    assertNoSecretRecorded();
  }

  @Test
  void aFailureIsRecordedWithItsType() {
    Workspace ws = workspace();
    assertThatThrownBy(() -> ws.readBytes("missing.txt"))
        .isInstanceOf(WorkspaceNoSuchFileException.class);
    SpanData read = only("sandbox4j.file.read");
    assertThat(read.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(read.getAttributes().get(SandboxTelemetry.ERROR_TYPE))
        .isEqualTo(WorkspaceNoSuchFileException.class.getName());
    assertThat(read.getEvents()).extracting(EventData::getName).containsExactly("exception");
  }

  @Test
  void aTimeoutIsAnErrorOnTheExecSpanAndInTheHistogram() {
    Workspace ws = workspace();
    ws.run(Command.argv("true"));
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.argv("sleep", "5"),
                    RunOptions.builder().timeout(java.time.Duration.ofMillis(200)).build()))
        .isInstanceOf(WorkspaceTimeoutException.class);
    List<SpanData> execs = named("sandbox4j.exec");
    assertThat(execs).hasSize(2);
    assertThat(execs.get(1).getAttributes().get(SandboxTelemetry.ERROR_TYPE))
        .isEqualTo(WorkspaceTimeoutException.class.getName());
    MetricData duration = metric("sandbox4j.exec.duration");
    assertThat(duration.getUnit()).isEqualTo("s");
    Map<String, Long> countByOutcome =
        duration.getHistogramData().getPoints().stream()
            .collect(
                java.util.stream.Collectors.toMap(
                    p -> p.getAttributes().get(SandboxTelemetry.OUTCOME),
                    HistogramPointData::getCount));
    assertThat(countByOutcome).isEqualTo(Map.of("ok", 1L, "error", 1L));
    assertThat(duration.getHistogramData().getPoints())
        .allSatisfy(
            p ->
                assertThat(p.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER))
                    .isEqualTo("host"));
  }

  @Test
  void lifecycleOperationsAreSpansAndCreateAndForkAreTimed() throws Exception {
    SandboxTelemetry telemetry = SandboxTelemetry.of(sdk);
    String id = telemetry.lifecycle("create", "test", null, () -> "sb-1");
    assertThat(id).isEqualTo("sb-1");
    assertThatThrownBy(
            () ->
                telemetry.lifecycle(
                    "fork",
                    "test",
                    "sb-1",
                    () -> {
                      throw new WorkspaceUnavailableException("sb-1 is gone");
                    }))
        .isInstanceOf(WorkspaceUnavailableException.class);
    telemetry.lifecycle("destroy", "test", "sb-1", () -> {});
    assertThat(only("sandbox4j.create").getAttributes().get(SandboxTelemetry.WORKSPACE_ID))
        .isNull();
    SpanData fork = only("sandbox4j.fork");
    assertThat(fork.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo("sb-1");
    assertThat(fork.getStatus().getStatusCode()).isEqualTo(StatusCode.ERROR);
    assertThat(only("sandbox4j.destroy").getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER))
        .isEqualTo("test");
    Map<String, MetricData> byName = metricsByName();
    assertThat(byName.get("sandbox4j.sandbox.create.duration").getHistogramData().getPoints())
        .singleElement()
        .satisfies(
            p -> assertThat(p.getAttributes().get(SandboxTelemetry.OUTCOME)).isEqualTo("ok"));
    assertThat(byName.get("sandbox4j.sandbox.fork.duration").getHistogramData().getPoints())
        .singleElement()
        .satisfies(
            p -> assertThat(p.getAttributes().get(SandboxTelemetry.OUTCOME)).isEqualTo("error"));

    try (AutoCloseable gauge =
        telemetry.observeSandboxes("test", () -> Map.of("running", 2L, "suspended", 1L))) {
      MetricData active = metric("sandbox4j.sandboxes.active");
      assertThat(active.getLongGaugeData().getPoints())
          .extracting(p -> p.getAttributes().get(SandboxTelemetry.STATE), LongPointData::getValue)
          .containsExactlyInAnyOrder(
              org.assertj.core.groups.Tuple.tuple("running", 2L),
              org.assertj.core.groups.Tuple.tuple("suspended", 1L));
    }
  }

  private void assertNoSecretRecorded() {
    for (SpanData span : spans.getFinishedSpanItems()) {
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
    assertThat(found).as("spans named %s", name).hasSize(1);
    return found.getFirst();
  }

  private Map<String, MetricData> metricsByName() {
    return metrics.collectAllMetrics().stream()
        .collect(java.util.stream.Collectors.toMap(MetricData::getName, m -> m));
  }

  private MetricData metric(String name) {
    MetricData found = metricsByName().get(name);
    assertThat(found).as("metric %s", name).isNotNull();
    return found;
  }
}
