package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Map;
import java.util.Optional;

/**
 * Key authentication, logging and metrics for servlets mounted beside the API: an unknown key is
 * the API's 401; a known one puts a {@link Tenant} into the request for the servlet.
 */
final class TenantFilter extends HttpFilter {

  private static final long serialVersionUID = 1L;
  static final String ATTRIBUTE = Tenant.class.getName();

  private final transient ApiServlet api;
  private final transient Sandboxes sandboxes;
  private final transient Metrics metrics;
  private final transient RequestLog log;
  private final String route;

  TenantFilter(ApiServlet api, Sandboxes sandboxes, Metrics metrics, RequestLog log, String route) {
    this.api = api;
    this.sandboxes = sandboxes;
    this.metrics = metrics;
    this.log = log;
    this.route = route;
  }

  @Override
  protected void doFilter(
      HttpServletRequest request, HttpServletResponse response, FilterChain chain)
      throws IOException, ServletException {
    long start = System.nanoTime();
    Organization org = null;
    try {
      org = api.authenticate(request);
      request.setAttribute(ATTRIBUTE, tenant(org));
      chain.doFilter(asOrganization(request, org), response);
    } catch (ApiException e) {
      metrics.error(e.code);
      ObjectNode body = Json.object();
      body.putObject("error").put("code", e.code.spelling()).put("message", e.getMessage());
      response.setStatus(e.status);
      response.setContentType("application/json");
      response.getOutputStream().write(Json.MAPPER.writeValueAsBytes(body));
    } finally {
      metrics.request(request.getMethod(), route, response.getStatus());
      log.request(
          request.getMethod(),
          route,
          org == null ? null : org.name(),
          null,
          response.getStatus(),
          (System.nanoTime() - start) / 1_000_000);
    }
  }

  /**
   * The request with the organization as its user principal: what servlets that scope state by
   * principal (the MCP endpoint's sessions) see, so one organization never reaches another's.
   */
  private static HttpServletRequest asOrganization(HttpServletRequest request, Organization org) {
    java.security.Principal principal = () -> "org:" + org.name();
    return new HttpServletRequestWrapper(request) {
      @Override
      public java.security.Principal getUserPrincipal() {
        return principal;
      }

      @Override
      public String getRemoteUser() {
        return principal.getName();
      }

      @Override
      public String getAuthType() {
        return "Bearer";
      }
    };
  }

  private Tenant tenant(Organization org) {
    return new Tenant() {
      @Override
      public String organization() {
        return org.name();
      }

      @Override
      public Workspace create(Map<String, String> labels) {
        try {
          Sandboxes.View v =
              sandboxes.create(
                  org,
                  new Sandboxes.CreateSpec(
                      null, null, null, null, null, null, null, labels, null, null, null, null,
                      null, null, null)); // the operator's isolation, as for any create
          return sandboxes.workspace(org, v.row().id());
        } catch (ApiException e) {
          throw new WorkspaceException(e.code.spelling() + ": " + e.getMessage());
        }
      }

      @Override
      public Optional<Workspace> sandbox(String id) {
        try {
          return Optional.of(sandboxes.workspace(org, id));
        } catch (ApiException e) {
          return Optional.empty();
        }
      }
    };
  }
}
