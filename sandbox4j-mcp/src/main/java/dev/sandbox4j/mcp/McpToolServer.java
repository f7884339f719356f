package dev.sandbox4j.mcp;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.ModelRetryException;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.ToolContext;
import dev.sandbox4j.agent.ToolDefinition;
import dev.sandbox4j.agent.Usage;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.modelcontextprotocol.json.jackson2.JacksonMcpJsonMapper;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpServerFeatures.SyncToolSpecification;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import jakarta.servlet.http.HttpServlet;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * An MCP server that offers tools, bound to a workspace, to MCP clients: over stdio ({@link
 * #serveStdio}) or over streamable HTTP as a servlet ({@link #streamableHttp}).
 *
 * <p>{@code tools/list} shows each tool's name, description and argument schema; {@code tools/call}
 * runs the tool in the workspace and answers with its result as text. A call that fails (invalid
 * arguments, a failed operation) answers with a result marked {@code isError} whose text is the
 * failure's message. There is no model and no run: each call stands alone.
 */
public final class McpToolServer {

  /**
   * Strict about duplicate keys: a message that names one twice is refused instead of the last
   * value silently winning over what a proxy or a log in front of the server read.
   */
  static final ObjectMapper JSON =
      new ObjectMapper(
          com.fasterxml.jackson.core.JsonFactory.builder()
              .enable(com.fasterxml.jackson.core.StreamReadFeature.STRICT_DUPLICATE_DETECTION)
              .build());

  private McpToolServer() {}

  /**
   * Serves {@code tools}, bound to {@code workspace}, on this process's stdin and stdout until
   * stdin ends. From the call on, {@link System#out} is {@link System#err}: stdout carries protocol
   * frames only.
   *
   * @param workspace the workspace every call acts in; created or attached on first use
   * @param tools the tools to offer, e.g. {@code Coder.builder().build().tools()}
   */
  public static void serveStdio(Workspace workspace, List<Tool> tools) {
    PrintStream stdout = System.out;
    System.setOut(System.err);
    serve(workspace, tools, System.in, stdout);
  }

  /**
   * An MCP endpoint over streamable HTTP (the official SDK's servlet transport) serving {@code
   * tools}; each MCP session acts in the workspace {@code workspaces} opens for it on its first
   * tool call, and that workspace is {@linkplain SessionWorkspaces#close closed} once when the
   * session ends: the client deletes it ({@code DELETE} with its {@code Mcp-Session-Id}) or the
   * servlet is destroyed, or it is left idle (no request in flight, no open event stream) for 30 to
   * 60 minutes. Later requests naming an ended session are answered 404. A session belongs to the
   * principal ({@code request.getUserPrincipal()}) that initialized it, or to no one: requests of
   * any other principal naming it are answered 404 too.
   *
   * <p>Mount it on one path of a Servlet 6 container <em>with async support</em> (the transport
   * answers with event streams), e.g. Jetty's {@code ServletHolder.setAsyncSupported(true)}. It
   * checks no credentials and no {@code Origin}: put authentication in front of it (a filter may
   * leave what {@link SessionWorkspaces#open} needs in request attributes) and bind it to loopback
   * otherwise; for sessions to be bound to their caller, the authentication must set the request's
   * user principal. Destroying the servlet ends every session.
   *
   * @param workspaces which workspace each session acts in, and what its end does to it
   * @param tools the tools to offer, e.g. {@code Coder.builder().build().tools()}
   */
  public static HttpServlet streamableHttp(SessionWorkspaces workspaces, List<Tool> tools) {
    // built elsewhere: this class must load without the servlet API, which the stdio server lacks
    return StreamableHttpEndpoint.create(workspaces, tools);
  }

  /** Serves on {@code in} and {@code out} until {@code in} ends. */
  static void serve(Workspace workspace, List<Tool> tools, InputStream in, OutputStream out) {
    Objects.requireNonNull(workspace, "workspace");
    Objects.requireNonNull(tools, "tools");
    CountDownLatch ended = new CountDownLatch(1);
    InputStream watched = new EndWatchingInputStream(in, ended);
    JacksonMcpJsonMapper mapper = new JacksonMcpJsonMapper(JSON);
    var transport = new StdioServerTransportProvider(mapper, watched, out);
    RunContext run = new StandaloneRun(workspace);
    McpSyncServer server =
        McpServer.sync(transport)
            .serverInfo("sandbox4j", version())
            .jsonMapper(mapper)
            .capabilities(McpSchema.ServerCapabilities.builder().tools(false).build())
            .tools(tools.stream().map(tool -> specification(tool, exchange -> run)).toList())
            .build();
    try {
      ended.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      server.closeGracefully();
    }
  }

  /** {@code tool} as the SDK serves it; {@code runs} gives the run (and workspace) of a call. */
  static SyncToolSpecification specification(
      Tool tool, Function<McpSyncServerExchange, RunContext> runs) {
    ToolDefinition definition = tool.definition();
    AtomicLong calls = new AtomicLong();
    return SyncToolSpecification.builder()
        .tool(
            McpSchema.Tool.builder()
                .name(definition.name())
                .description(definition.description())
                .inputSchema(new LinkedHashMap<>(definition.parametersSchema()))
                .build())
        .callHandler(
            (exchange, request) -> {
              RunContext run;
              try {
                run = runs.apply(exchange);
              } catch (RuntimeException e) {
                return error(e.getMessage() == null ? e.toString() : e.getMessage());
              }
              return call(
                  tool,
                  new Call(
                      run, definition.name() + "-" + calls.incrementAndGet(), definition.name()),
                  request.arguments());
            })
        .build();
  }

  static CallToolResult call(Tool tool, ToolContext context, Map<String, Object> arguments) {
    try {
      String json = JSON.writeValueAsString(arguments == null ? Map.of() : arguments);
      String result = tool.call(context, json);
      return CallToolResult.builder().addTextContent(result == null ? "" : result).build();
    } catch (ModelRetryException e) {
      return error(e.getMessage());
    } catch (Exception e) {
      return error(e.getMessage() == null ? e.toString() : e.getMessage());
    }
  }

  private static CallToolResult error(String message) {
    return CallToolResult.builder().addTextContent(message).isError(true).build();
  }

  static String version() {
    String v = McpToolServer.class.getPackage().getImplementationVersion();
    return v == null ? "dev" : v;
  }

  /** The run every call belongs to: no prompt, no messages, the one workspace. */
  record StandaloneRun(Workspace workspace) implements RunContext {
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

  /** One call: its output while it runs goes nowhere (the client sees the result). */
  private record Call(RunContext run, String toolCallId, String toolName) implements ToolContext {
    @Override
    public void emitOutput(String stream, String text) {}
  }

  /** Counts down {@code ended} when the stream ends or fails. */
  private static final class EndWatchingInputStream extends FilterInputStream {
    private final CountDownLatch ended;

    EndWatchingInputStream(InputStream in, CountDownLatch ended) {
      super(in);
      this.ended = ended;
    }

    @Override
    public int read() throws IOException {
      return watch(() -> super.read());
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      return watch(() -> super.read(b, off, len));
    }

    private interface Read {
      int read() throws IOException;
    }

    private int watch(Read read) throws IOException {
      try {
        int n = read.read();
        if (n < 0) {
          ended.countDown();
        }
        return n;
      } catch (IOException e) {
        ended.countDown();
        throw e;
      }
    }

    @Override
    public void close() throws IOException {
      ended.countDown();
      super.close();
    }
  }
}
