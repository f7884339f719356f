package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.mcp.McpToolServer;
import dev.sandbox4j.mcp.SessionWorkspaces;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import jakarta.servlet.ServletConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Map;

/**
 * {@code /mcp}: the Coder tools over MCP (streamable HTTP), behind the API's key check. Each MCP
 * session acts in one sandbox of the key's organization: {@code ?sandbox=ID} (another
 * organization's or an unknown id is a 404, like the API's), or one created on the session's first
 * tool call, owned by the organization, counted in its quota and labelled {@code created-by=mcp}.
 *
 * <p>Ending a session (the client's DELETE, idleness, the server stopping) leaves its sandbox
 * running, as every sandbox of the API: the organization deletes it with {@code DELETE
 * /v1/sandboxes/{id}}. A session belongs to the organization that opened it: another organization's
 * key naming its id gets a 404.
 */
final class McpEndpoint extends HttpServlet {

  private static final long serialVersionUID = 1L;

  /** Where the server mounts it. */
  static final String PATH = "/mcp/*";

  /** The label of the sandboxes it creates. */
  static final Map<String, String> LABELS = Map.of("created-by", "mcp");

  private final transient HttpServlet mcp =
      McpToolServer.streamableHttp(
          new TenantSandboxes(), Coder.builder().repoContext(false).build().tools());

  @Override
  public void init(ServletConfig config) throws ServletException {
    super.init(config);
    mcp.init(config);
  }

  @Override
  protected void service(HttpServletRequest request, HttpServletResponse response)
      throws ServletException, IOException {
    Tenant tenant = Tenant.of(request);
    String id = request.getParameter("sandbox");
    if (id != null && tenant.sandbox(id).isEmpty()) {
      ObjectNode body = Json.object();
      body.putObject("error")
          .put("code", ErrorCode.NOT_FOUND.spelling())
          .put("message", "no sandbox " + id);
      response.setStatus(HttpServletResponse.SC_NOT_FOUND);
      response.setContentType("application/json");
      response.getOutputStream().write(Json.MAPPER.writeValueAsBytes(body));
      return;
    }
    // the request's principal is the organization (TenantFilter): the endpoint binds sessions to it
    mcp.service(request, response);
  }

  @Override
  public void destroy() {
    mcp.destroy();
  }

  /** The session's sandbox: the one named by {@code ?sandbox=ID}, or a new one of the tenant. */
  private static final class TenantSandboxes implements SessionWorkspaces {
    @Override
    public Workspace open(HttpServletRequest firstCall) {
      Tenant tenant = Tenant.of(firstCall);
      String id = firstCall.getParameter("sandbox");
      if (id == null) {
        return tenant.create(LABELS);
      }
      return tenant
          .sandbox(id)
          .orElseThrow(() -> new WorkspaceUnavailableException("no sandbox " + id));
    }
  }
}
