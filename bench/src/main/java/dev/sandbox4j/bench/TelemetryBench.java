package dev.sandbox4j.bench;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.Param;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.metrics.SdkMeterProvider;
import io.opentelemetry.sdk.testing.exporter.InMemoryMetricReader;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.io.InputStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
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
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What OpenTelemetry instrumentation costs per tool call (issue 21): a run of 10 tool calls, each
 * one workspace file operation on an in-memory backend that answers at once, so that model, command
 * and I/O time are ~0 and what is left is the harness and its spans. {@code telemetry=none} has no
 * SDK installed (the API's no-op: what a user without an SDK pays); {@code telemetry=sdk} traces
 * through an SDK with a simple span processor into the in-memory exporter (cleared after each run)
 * and an in-memory metric reader: per tool call an {@code execute_tool} span and a {@code
 * sandbox4j.file.exists} span, plus a share of the run's and the model requests' spans. The no-op
 * overhead is {@code none} here less the same benchmark on a build without instrumentation
 * (docs/benchmarks.md says how it was measured); the SDK's is {@code sdk} less {@code none}. Run
 * with {@code bench/jmh TelemetryBench}.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
@State(Scope.Benchmark)
public class TelemetryBench {

  static final int CALLS_PER_RUN = 10;

  @org.openjdk.jmh.annotations.Param({"none", "sdk"})
  public String telemetry;

  record PathArg(@Param("path") String path) {}

  private Agent agent;
  private RunConfig config;
  private InMemorySpanExporter spans;
  private OpenTelemetrySdk sdk;

  @Setup
  public void setUp() {
    Tool exists =
        Tool.of(
            "exists",
            "Whether a file exists.",
            PathArg.class,
            (ctx, args) -> Boolean.toString(ctx.workspace().exists(args.path())));
    List<ResponsePart> calls = new ArrayList<>();
    for (int i = 0; i < CALLS_PER_RUN; i++) {
      calls.add(new ResponsePart.ToolCall("call-" + i, "exists", "{\"path\":\"src/main.py\"}"));
    }
    ResponseMessage toolCalls = ResponseMessage.of(calls);
    ResponseMessage done = ResponseMessage.text("done");
    Agent.Builder builder =
        Agent.builder()
            .model(
                FunctionModel.of(
                    "anthropic:claude-bench",
                    request ->
                        request.messages().getLast() instanceof RequestMessage r
                                && r.parts().getFirst() instanceof RequestPart.UserPrompt
                            ? toolCalls
                            : done))
            .tool(exists);
    if (telemetry.equals("sdk")) {
      spans = InMemorySpanExporter.create();
      sdk =
          OpenTelemetrySdk.builder()
              .setTracerProvider(
                  SdkTracerProvider.builder()
                      .addSpanProcessor(SimpleSpanProcessor.create(spans))
                      .build())
              .setMeterProvider(
                  SdkMeterProvider.builder()
                      .registerMetricReader(InMemoryMetricReader.create())
                      .build())
              .build();
      builder.openTelemetry(sdk);
    }
    agent = builder.build();
    config = RunConfig.builder().workspace(new InstantBackend()).build();
  }

  @TearDown
  public void tearDown() {
    if (sdk != null) {
      sdk.close();
    }
  }

  /** One run of 10 tool calls, each a workspace file operation; the figure is per tool call. */
  @Benchmark
  @OperationsPerInvocation(CALLS_PER_RUN)
  public RunResult toolCall() {
    RunResult result = agent.runSync("go", config);
    if (spans != null) {
      spans.reset(); // the exporter keeps every span: bounded memory over millions of runs
    }
    return result;
  }

  /** A workspace whose file operations answer at once from memory: only the harness is timed. */
  static final class InstantBackend implements WorkspaceBackend, SupportsFileSystem {
    private static final WorkspaceRef REF = new WorkspaceRef("bench", "instant");
    private static final FileStat FILE =
        new FileStat("/work/src/main.py", FileType.FILE, 10, 0644, Instant.EPOCH);

    @Override
    public Optional<WorkspaceRef> ref() {
      return Optional.of(REF);
    }

    @Override
    public String workingDirectory() {
      return "/work";
    }

    @Override
    public FileStat stat(String path) {
      return FILE;
    }

    @Override
    public InputStream openRead(String path) {
      return InputStream.nullInputStream();
    }

    @Override
    public void write(String path, InputStream content) {}

    @Override
    public List<DirectoryEntry> list(String path) {
      return List.of();
    }

    @Override
    public void createDirectories(String path) {}

    @Override
    public void remove(String path, boolean recursive) {}

    @Override
    public void rename(String from, String to) {}
  }
}
