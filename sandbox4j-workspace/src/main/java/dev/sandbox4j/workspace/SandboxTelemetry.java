package dev.sandbox4j.workspace;

import io.opentelemetry.api.GlobalOpenTelemetry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.metrics.DoubleHistogram;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.api.metrics.ObservableLongGauge;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * Sandbox4j's traces and metrics, through the OpenTelemetry API only: the span and instrument names
 * every module uses, and the one place they are made.
 *
 * <p>The library never installs an SDK or an exporter. {@link #global()} follows {@link
 * GlobalOpenTelemetry} (what the OpenTelemetry Java agent or {@code
 * OpenTelemetrySdk...buildAndRegisterGlobal()} installs), looked up again on every operation
 * without ever fixing the global to a no-op, so an SDK registered after Sandbox4j's first use is
 * still picked up. {@link #of(OpenTelemetry)} uses an instance the application passes in instead
 * (its tests, or an application that keeps its SDK out of the global). Without an SDK every call is
 * the API's no-op: no attribute is built for a span that does not record.
 *
 * <p>What is recorded: workspace provider and id, a command's program name ({@code argv[0]}, never
 * its arguments or environment) and exit code, file paths, and the type of an error. Never file
 * contents, environment values, stdin or output. A non-zero exit is a result, not a span error.
 *
 * <p>Thread-safe.
 */
public final class SandboxTelemetry {

  /** The instrumentation scope of every span and instrument: {@value}. */
  public static final String SCOPE = "dev.sandbox4j";

  /** The provider of the workspace an operation acts on ({@code local}, {@code remote}, ...). */
  public static final AttributeKey<String> WORKSPACE_PROVIDER =
      AttributeKey.stringKey("sandbox4j.workspace.provider");

  /** The id of the workspace an operation acts on. */
  public static final AttributeKey<String> WORKSPACE_ID =
      AttributeKey.stringKey("sandbox4j.workspace.id");

  /** How an operation ended, on the metrics: {@code ok} or {@code error}. */
  public static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("sandbox4j.outcome");

  /** A sandbox's lifecycle state, on {@code sandbox4j.sandboxes.active}. */
  public static final AttributeKey<String> STATE = AttributeKey.stringKey("sandbox4j.state");

  /** The semantic conventions' {@code error.type}: the exception's class name. */
  public static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");

  static final AttributeKey<String> PROCESS_COMMAND = AttributeKey.stringKey("process.command");
  static final AttributeKey<Long> PROCESS_EXIT_CODE = AttributeKey.longKey("process.exit.code");
  static final AttributeKey<String> FILE_PATH = AttributeKey.stringKey("file.path");
  static final AttributeKey<String> FILE_TARGET_PATH =
      AttributeKey.stringKey("sandbox4j.file.target_path");

  /** Seconds, as the server's Prometheus histogram has them, from 5 ms to half an hour. */
  private static final List<Double> SECONDS_BUCKETS =
      List.of(
          0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0);

  private static final SandboxTelemetry GLOBAL = new SandboxTelemetry(null);

  private final OpenTelemetry fixed; // null: follow GlobalOpenTelemetry
  private volatile Instruments instruments;

  private SandboxTelemetry(OpenTelemetry fixed) {
    this.fixed = fixed;
  }

  /** Telemetry through whatever {@link GlobalOpenTelemetry} holds at each operation. */
  public static SandboxTelemetry global() {
    return GLOBAL;
  }

  /** Telemetry through {@code openTelemetry}, never the global one. */
  public static SandboxTelemetry of(OpenTelemetry openTelemetry) {
    return new SandboxTelemetry(Objects.requireNonNull(openTelemetry, "openTelemetry"));
  }

  /** The OpenTelemetry in force now: the one given, or the global one (a no-op if none is set). */
  public OpenTelemetry openTelemetry() {
    return fixed != null ? fixed : GlobalOpenTelemetry.getOrNoop();
  }

  /** The tracer of scope {@value #SCOPE}. */
  public Tracer tracer() {
    return instruments().tracer;
  }

  /**
   * Runs a lifecycle operation of a machine provider in a span {@code sandbox4j.OPERATION}
   * (operation is {@code create}, {@code fork}, {@code snapshot}, {@code suspend}, {@code
   * hibernate}, {@code destroy}, ...), child of the caller's current span, with the provider and
   * the id (null while not known: a create). {@code create} and {@code fork} also feed their
   * duration histograms. A failure is recorded on the span with its type and rethrown.
   */
  public <T> T lifecycle(String operation, String provider, String id, Supplier<T> body) {
    Instruments in = instruments();
    Span span = in.tracer.spanBuilder("sandbox4j." + operation).startSpan();
    if (span.isRecording()) {
      span.setAttribute(WORKSPACE_PROVIDER, provider);
      if (id != null) {
        span.setAttribute(WORKSPACE_ID, id);
      }
    }
    DoubleHistogram histogram =
        switch (operation) {
          case "create" -> in.createDuration;
          case "fork", "fork_files" -> in.forkDuration;
          default -> null;
        };
    long start = System.nanoTime();
    boolean ok = false;
    try (Scope ignored = span.makeCurrent()) {
      T result = body.get();
      ok = true;
      return result;
    } catch (RuntimeException | Error e) {
      recordFailure(span, e);
      throw e;
    } finally {
      if (histogram != null) {
        histogram.record((System.nanoTime() - start) / 1e9, in.outcome(provider, ok));
      }
      span.end();
    }
  }

  /** {@link #lifecycle(String, String, String, Supplier)} for an operation without a result. */
  public void lifecycle(String operation, String provider, String id, Runnable body) {
    lifecycle(
        operation,
        provider,
        id,
        () -> {
          body.run();
          return null;
        });
  }

  /**
   * Puts {@code id} on the current span as {@link #WORKSPACE_ID} and returns it: for a {@code
   * create} whose id is known only once the body made the sandbox.
   */
  public static String tagWorkspaceId(String id) {
    Span span = Span.current();
    if (span.isRecording()) {
      span.setAttribute(WORKSPACE_ID, id);
    }
    return id;
  }

  /**
   * Reports {@code sandbox4j.sandboxes.active}, the sandboxes of {@code provider} by state, read
   * from {@code countByState} each time the SDK collects. Close the result to stop (a provider that
   * is closed, a server that stops).
   */
  public AutoCloseable observeSandboxes(String provider, Supplier<Map<String, Long>> countByState) {
    Objects.requireNonNull(provider, "provider");
    Objects.requireNonNull(countByState, "countByState");
    ObservableLongGauge gauge =
        instruments()
            .meter
            .gaugeBuilder("sandbox4j.sandboxes.active")
            .ofLongs()
            .setUnit("{sandbox}")
            .setDescription("Sandboxes that exist, by provider and lifecycle state")
            .buildWithCallback(
                measurement -> {
                  for (Map.Entry<String, Long> e : countByState.get().entrySet()) {
                    measurement.record(
                        e.getValue(),
                        Attributes.of(WORKSPACE_PROVIDER, provider, STATE, e.getKey()));
                  }
                });
    return gauge::close;
  }

  /**
   * Marks {@code span} failed by {@code error}: status ERROR, {@code error.type} the exception's
   * class name, and an {@code exception} event with {@code exception.type} only. Never the message
   * or the stack trace: a message may quote a command line, a file's lines or a tool's arguments.
   */
  public static void recordFailure(Span span, Throwable error) {
    if (!span.isRecording()) {
      return;
    }
    String type = error.getClass().getName();
    span.setAttribute(ERROR_TYPE, type);
    span.addEvent("exception", Attributes.of(EXCEPTION_TYPE, type));
    span.setStatus(StatusCode.ERROR, error.getClass().getSimpleName());
  }

  private static final AttributeKey<String> EXCEPTION_TYPE =
      AttributeKey.stringKey("exception.type");

  void recordExec(String provider, boolean ok, long nanos) {
    Instruments in = instruments();
    in.execDuration.record(nanos / 1e9, in.outcome(provider, ok));
  }

  Instruments instruments() {
    OpenTelemetry current = openTelemetry();
    Instruments known = instruments;
    if (known == null || known.source != current) {
      known = new Instruments(current);
      instruments = known;
    }
    return known;
  }

  /** The tracer and instruments of one OpenTelemetry instance, made once per instance. */
  static final class Instruments {
    final OpenTelemetry source;
    final Tracer tracer;
    final Meter meter;
    final DoubleHistogram createDuration;
    final DoubleHistogram forkDuration;
    final DoubleHistogram execDuration;
    // the metric attributes of a provider, ok and error, made once: no allocation per command
    private final Map<String, Attributes[]> outcomes = new ConcurrentHashMap<>();

    Instruments(OpenTelemetry source) {
      this.source = source;
      this.tracer = source.getTracer(SCOPE);
      this.meter = source.getMeter(SCOPE);
      this.createDuration =
          histogram("sandbox4j.sandbox.create.duration", "Time to create a sandbox");
      this.forkDuration = histogram("sandbox4j.sandbox.fork.duration", "Time to fork a sandbox");
      this.execDuration =
          histogram("sandbox4j.exec.duration", "Time from starting a command to its exit");
    }

    private DoubleHistogram histogram(String name, String description) {
      return meter
          .histogramBuilder(name)
          .setUnit("s")
          .setDescription(description)
          .setExplicitBucketBoundariesAdvice(SECONDS_BUCKETS)
          .build();
    }

    Attributes outcome(String provider, boolean ok) {
      Attributes[] both =
          outcomes.computeIfAbsent(
              provider,
              p ->
                  new Attributes[] {
                    Attributes.of(WORKSPACE_PROVIDER, p, OUTCOME, "ok"),
                    Attributes.of(WORKSPACE_PROVIDER, p, OUTCOME, "error")
                  });
      return ok ? both[0] : both[1];
    }
  }
}
