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
import io.modelcontextprotocol.server.transport.StdioServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
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

/**
 * An MCP server that offers tools, all bound to one workspace, to an MCP client over stdio.
 *
 * <p>{@code tools/list} shows each tool's name, description and argument schema; {@code tools/call}
 * runs the tool in that workspace and answers with its result as text. A call that fails (invalid
 * arguments, a failed operation) answers with a result marked {@code isError} whose text is the
 * failure's message. There is no model and no run: each call stands alone.
 */
public final class McpToolServer {

  private static final ObjectMapper JSON = new ObjectMapper();

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
            .tools(tools.stream().map(tool -> specification(tool, run)).toList())
            .build();
    try {
      ended.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      server.closeGracefully();
    }
  }

  static SyncToolSpecification specification(Tool tool, RunContext run) {
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
            (exchange, request) ->
                call(
                    tool,
                    new Call(
                        run, definition.name() + "-" + calls.incrementAndGet(), definition.name()),
                    request.arguments()))
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

  private static String version() {
    String v = McpToolServer.class.getPackage().getImplementationVersion();
    return v == null ? "dev" : v;
  }

  /** The run every call belongs to: no prompt, no messages, the one workspace. */
  private record StandaloneRun(Workspace workspace) implements RunContext {
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
