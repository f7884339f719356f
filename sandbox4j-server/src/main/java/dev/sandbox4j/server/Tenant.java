package dev.sandbox4j.server;

import dev.sandbox4j.workspace.Workspace;
import jakarta.servlet.ServletRequest;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The organization a request to a servlet mounted with {@link SandboxServer.Builder#servlet} was
 * authenticated as, and its sandboxes: what such a servlet (the MCP endpoint) may reach.
 *
 * <p>The server checks the API key before the servlet runs and puts the tenant in the request:
 * {@code Tenant.of(request)}. A servlet never sees the key. Implementations are thread-safe.
 */
public interface Tenant {

  /** The organization's name. */
  String organization();

  /**
   * A new sandbox owned by the organization, with default settings and {@code labels}, under the
   * organization's quota and create rate limit.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceException if the quota or rate limit refuses it, or
   *     the engine fails
   */
  Workspace create(Map<String, String> labels);

  /** The organization's sandbox {@code id}; empty for another organization's or an unknown one. */
  Optional<Workspace> sandbox(String id);

  /**
   * The tenant of a request that passed the server's key check.
   *
   * @throws IllegalStateException if the request did not come through the server's key check
   */
  static Tenant of(ServletRequest request) {
    Object tenant = Objects.requireNonNull(request, "request").getAttribute(TenantFilter.ATTRIBUTE);
    if (tenant instanceof Tenant t) {
      return t;
    }
    throw new IllegalStateException(
        "no tenant: mount the servlet with SandboxServer.Builder.servlet(...)");
  }
}
