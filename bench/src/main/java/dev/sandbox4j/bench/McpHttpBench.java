package dev.sandbox4j.bench;

import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.ToolContext;
import dev.sandbox4j.agent.Usage;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.mcp.McpToolServer;
import dev.sandbox4j.mcp.SessionWorkspaces;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.ListToolsResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What MCP over streamable HTTP adds to a tool call: the Coder tools served by {@link
 * McpToolServer#streamableHttp} in a Jetty on loopback, called with the official Java SDK's client,
 * against the same tools called in-process; a host workspace, so the command costs the least.
 * Sample-time mode, so JMH reports p50/p95/p99. Run with {@code bench/jmh McpHttpBench}.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
@State(Scope.Benchmark)
public class McpHttpBench {

  private Path root;
  private Server jetty;
  private McpSyncClient client;
  private Tool shell;
  private Tool readFile;
  private ToolContext context;

  @Setup
  public void setUp() throws Exception {
    root = Files.createTempDirectory("sandbox4j-mcp-bench");
    Workspace workspace = Workspace.of(HostWorkspaceProvider.create(root).newBackend());
    workspace.writeText("note.txt", "hello\n");
    List<Tool> tools = Coder.builder().repoContext(false).build().tools();
    shell = tool(tools, "shell");
    readFile = tool(tools, "read_file");
    context = new InProcess(workspace);

    jetty = new Server();
    ServerConnector connector = new ServerConnector(jetty);
    connector.setHost("127.0.0.1");
    jetty.addConnector(connector);
    ServletHolder holder =
        new ServletHolder(McpToolServer.streamableHttp(SessionWorkspaces.shared(workspace), tools));
    holder.setAsyncSupported(true);
    ServletContextHandler context = new ServletContextHandler();
    context.addServlet(holder, "/mcp");
    jetty.setHandler(context);
    jetty.start();
    client =
        McpClient.sync(
                HttpClientStreamableHttpTransport.builder(
                        "http://127.0.0.1:" + connector.getLocalPort())
                    .endpoint("/mcp")
                    .build())
            .build();
    client.initialize();
  }

  @TearDown
  public void tearDown() throws Exception {
    client.close();
    jetty.stop();
    try (Stream<Path> all = Files.walk(root)) {
      all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  /** The protocol alone: one request and answer, no tool runs. */
  @Benchmark
  public ListToolsResult listToolsOverHttp() {
    return client.listTools();
  }

  @Benchmark
  public CallToolResult shellTrueOverHttp() {
    return client.callTool(new CallToolRequest("shell", Map.of("command", "true")));
  }

  @Benchmark
  public String shellTrueInProcess() throws Exception {
    return shell.call(context, "{\"command\":\"true\"}");
  }

  @Benchmark
  public CallToolResult readFileOverHttp() {
    return client.callTool(new CallToolRequest("read_file", Map.of("path", "note.txt")));
  }

  @Benchmark
  public String readFileInProcess() throws Exception {
    return readFile.call(context, "{\"path\":\"note.txt\"}");
  }

  private static Tool tool(List<Tool> tools, String name) {
    return tools.stream().filter(t -> t.definition().name().equals(name)).findFirst().orElseThrow();
  }

  /** A tool call outside any server: what the endpoint's handler does, minus the protocol. */
  private record InProcess(Workspace workspace) implements ToolContext, RunContext {
    @Override
    public RunContext run() {
      return this;
    }

    @Override
    public String toolCallId() {
      return "bench";
    }

    @Override
    public String toolName() {
      return "bench";
    }

    @Override
    public void emitOutput(String stream, String text) {}

    @Override
    public String prompt() {
      return "";
    }

    @Override
    public Optional<WorkspaceRef> workspaceRef() {
      return workspace.ref();
    }

    @Override
    public List<Message> messages() {
      return List.of();
    }

    @Override
    public Usage usage() {
      return Usage.NONE;
    }
  }
}
