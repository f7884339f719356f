package dev.sandbox4j.mcp;

import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import jakarta.servlet.http.HttpServletRequest;
import java.util.Objects;

/**
 * Which workspace each session of an HTTP MCP endpoint ({@link McpToolServer#streamableHttp}) acts
 * in, and what happens to it when the session ends.
 *
 * <p>{@link #open} is called once per session, on its first tool call; every later call of that
 * session acts in the workspace it returned. A session that never calls a tool opens nothing. When
 * a session that opened a workspace ends (the client deletes it, it is left idle until the server
 * forgets it, or the endpoint is destroyed), {@link #close} is called once with that workspace.
 *
 * <p>Implementations must be thread-safe: sessions open and end concurrently. Neither method is
 * called twice for one session.
 */
public interface SessionWorkspaces {

  /**
   * The workspace a session acts in. It may be lazy ({@code Workspace.of(provider.newBackend())}
   * creates the machine on its first operation) or an existing one.
   *
   * @param firstCall the HTTP request of the session's first {@code tools/call}: its attributes
   *     hold what filters in front of the endpoint put there (e.g. the authenticated caller), its
   *     parameters what the client put in the endpoint's URL. Valid only during this call.
   * @throws RuntimeException to refuse: the tool call answers with an {@code isError} result
   *     carrying the exception's message, and the next tool call of the session asks again
   */
  Workspace open(HttpServletRequest firstCall);

  /**
   * Called once when a session whose {@link #open} returned {@code workspace} ends. The default
   * does nothing: the workspace keeps running, as the endpoint never destroys one on its own; an
   * implementation that created the workspace for the session may destroy it here.
   */
  default void close(Workspace workspace) {}

  /** Every session acts in {@code workspace}; ending a session leaves it as it is. */
  static SessionWorkspaces shared(Workspace workspace) {
    Objects.requireNonNull(workspace, "workspace");
    return request -> workspace;
  }

  /**
   * Each session acts in a workspace of its own from {@code provider}, created on the session's
   * first operation in it; ending the session leaves it running (its owner removes it with {@link
   * WorkspaceProvider#destroy}).
   */
  static SessionWorkspaces newPerSession(WorkspaceProvider provider) {
    Objects.requireNonNull(provider, "provider");
    return request -> Workspace.of(provider.newBackend());
  }
}
