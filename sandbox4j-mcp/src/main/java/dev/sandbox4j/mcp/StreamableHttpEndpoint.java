package dev.sandbox4j.mcp;

import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import jakarta.servlet.ServletConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;

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

  private final transient HttpServletStreamableServerTransportProvider transport;
  private final transient McpSyncServer server;
  private final transient HttpSessions sessions;

  StreamableHttpEndpoint(
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
