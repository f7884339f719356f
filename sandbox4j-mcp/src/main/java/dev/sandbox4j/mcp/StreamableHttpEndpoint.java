package dev.sandbox4j.mcp;

import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.Tool;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.json.jackson2.JacksonMcpJsonMapper;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import jakarta.servlet.ServletConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * The servlet {@link McpToolServer#streamableHttp} returns: the SDK's streamable-HTTP transport,
 * plus the end of each session's workspace when the client deletes the session or the servlet is
 * destroyed.
 *
 * <p>Requests naming a session that has ended are answered 404, as the MCP specification asks of a
 * terminated session, so that the client starts a new one instead of reaching a workspace that is
 * closed.
 */
final class StreamableHttpEndpoint extends HttpServlet {

  private static final String SESSION_HEADER = "Mcp-Session-Id";

  /** The transport-context key under which the request being served is kept for the tools. */
  private static final String HTTP_REQUEST = "sandbox4j.httpRequest";

  private final transient HttpServletStreamableServerTransportProvider transport;
  private final transient McpSyncServer server;
  private final transient HttpSessions sessions;

  /** See {@link McpToolServer#streamableHttp}. Declared as a servlet: see there why. */
  static HttpServlet create(SessionWorkspaces workspaces, List<Tool> tools) {
    Objects.requireNonNull(workspaces, "workspaces");
    Objects.requireNonNull(tools, "tools");
    JacksonMcpJsonMapper mapper = new JacksonMcpJsonMapper(McpToolServer.JSON);
    HttpSessions sessions = new HttpSessions(workspaces);
    var transport =
        HttpServletStreamableServerTransportProvider.builder()
            .jsonMapper(mapper)
            // the container decides the path: an empty endpoint suffix matches wherever mounted
            .mcpEndpoint("")
            .contextExtractor(request -> McpTransportContext.create(Map.of(HTTP_REQUEST, request)))
            .build();
    Function<McpSyncServerExchange, RunContext> runs =
        exchange ->
            new McpToolServer.StandaloneRun(
                sessions.workspace(
                    exchange.sessionId(),
                    (HttpServletRequest) exchange.transportContext().get(HTTP_REQUEST)));
    McpSyncServer server =
        McpServer.sync(transport)
            .serverInfo("sandbox4j", McpToolServer.version())
            .jsonMapper(mapper)
            .capabilities(McpSchema.ServerCapabilities.builder().tools(false).build())
            .tools(tools.stream().map(tool -> McpToolServer.specification(tool, runs)).toList())
            .build();
    return new StreamableHttpEndpoint(transport, server, sessions);
  }

  private StreamableHttpEndpoint(
      HttpServletStreamableServerTransportProvider transport,
      McpSyncServer server,
      HttpSessions sessions) {
    this.transport = transport;
    this.server = server;
    this.sessions = sessions;
  }

  @Override
  public void init(ServletConfig config) throws ServletException {
    super.init(config);
    transport.init(config);
  }

  @Override
  protected void service(HttpServletRequest request, HttpServletResponse response)
      throws ServletException, IOException {
    String id = request.getHeader(SESSION_HEADER);
    if (id != null && sessions.hasEnded(id)) {
      response.sendError(HttpServletResponse.SC_NOT_FOUND, "the MCP session has ended");
      return;
    }
    if (id != null && "DELETE".equals(request.getMethod())) {
      // before the transport answers: a client that sees the answer sees the workspace closed
      sessions.end(id);
    }
    transport.service(request, response);
  }

  /** Stops serving, then ends every session (each workspace's {@code close}, once). */
  @Override
  public void destroy() {
    try {
      server.closeGracefully();
    } finally {
      sessions.endAll();
    }
  }
}
