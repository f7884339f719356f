package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.metrics.data.MetricData;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The engine's lifecycle operations as spans and the create/fork histograms, on real local
 * sandboxes (labelled, each destroyed by the test) and an SDK of the test's own.
 */
class LocalSandboxTelemetryTest {
  private static final String LABEL = "sandbox4j.test";
  private static final String TAG = "telemetry-" + UUID.randomUUID().toString().substring(0, 8);

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
  private final List<WorkspaceRef> created = new ArrayList<>();

  @BeforeAll
  static void requireEngine() {
    Prerequisites.requireLocalEngine();
  }

  @AfterEach
  void cleanUp() {
    LocalSandbox plain = LocalSandbox.builder().label(LABEL, TAG).progress(line -> {}).build();
    for (WorkspaceRef ref : created) {
      plain.destroy(ref);
    }
    sdk.close();
  }

  @Test
  void createExecForkSuspendDestroyAreOneTraceUnderTheCaller() {
    LocalSandbox sandboxes =
        LocalSandbox.builder().label(LABEL, TAG).progress(line -> {}).openTelemetry(sdk).build();
    Span caller = sdk.getTracer("test").spanBuilder("caller").startSpan();
    WorkspaceRef ref;
    WorkspaceRef fork;
    try (Scope ignored = caller.makeCurrent()) {
      Workspace ws = Workspace.of(sandboxes.newBackend()).withOpenTelemetry(sdk);
      ref = ws.open();
      created.add(ref);
      assertThat(ws.run(Command.argv("true")).exitCode()).isZero();
      ForkResult forked = sandboxes.forkFiles(ref);
      fork = forked.ref();
      created.add(fork);
      sandboxes.suspend(ref);
      sandboxes.destroy(fork);
    } finally {
      caller.end();
    }
    String parent = caller.getSpanContext().getSpanId();
    SpanData create = only("sandbox4j.create");
    assertThat(create.getParentSpanId()).isEqualTo(parent);
    assertThat(create.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER)).isEqualTo("local");
    assertThat(create.getAttributes().get(SandboxTelemetry.WORKSPACE_ID)).isEqualTo(ref.id());
    assertThat(only("sandbox4j.fork_files").getAttributes().get(SandboxTelemetry.WORKSPACE_ID))
        .isEqualTo(ref.id());
    assertThat(only("sandbox4j.suspend").getAttributes().get(SandboxTelemetry.WORKSPACE_ID))
        .isEqualTo(ref.id());
    assertThat(only("sandbox4j.destroy").getAttributes().get(SandboxTelemetry.WORKSPACE_ID))
        .isEqualTo(fork.id());
    assertThat(only("sandbox4j.exec").getAttributes().get(SandboxTelemetry.WORKSPACE_ID))
        .isEqualTo(ref.id());
    assertThat(spans.getFinishedSpanItems())
        .allSatisfy(
            s -> assertThat(s.getTraceId()).isEqualTo(caller.getSpanContext().getTraceId()));

    Map<String, MetricData> byName =
        metrics.collectAllMetrics().stream().collect(Collectors.toMap(MetricData::getName, m -> m));
    for (String name :
        List.of(
            "sandbox4j.sandbox.create.duration",
            "sandbox4j.sandbox.fork.duration",
            "sandbox4j.exec.duration")) {
      assertThat(byName.get(name).getHistogramData().getPoints())
          .as(name)
          .singleElement()
          .satisfies(
              p -> {
                assertThat(p.getCount()).isEqualTo(1);
                assertThat(p.getAttributes().get(SandboxTelemetry.WORKSPACE_PROVIDER))
                    .isEqualTo("local");
                assertThat(p.getAttributes().get(SandboxTelemetry.OUTCOME)).isEqualTo("ok");
              });
    }
  }

  private SpanData only(String name) {
    List<SpanData> found =
        spans.getFinishedSpanItems().stream().filter(s -> s.getName().equals(name)).toList();
    assertThat(found).as("spans named %s among %s", name, spans.getFinishedSpanItems()).hasSize(1);
    return found.getFirst();
  }
}
