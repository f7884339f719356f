package dev.sandbox4j.mcp;

import dev.sandbox4j.workspace.Workspace;
import jakarta.servlet.http.HttpServletRequest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The workspace of each MCP session of one HTTP endpoint, opened on the session's first tool call
 * and closed once when the session ends.
 *
 * <p>State per session: no entry (nothing opened yet) → open (workspace opened) → ended (removed,
 * {@link SessionWorkspaces#close} called, id remembered so that a call racing the end cannot open a
 * second workspace). {@code sessions} is a concurrent map; each {@link Session} guards its own
 * fields with its monitor, so opening one session's workspace never blocks another's.
 */
final class HttpSessions {

  /** How many ended ids are remembered: enough to cover calls in flight when a session ends. */
  private static final int ENDED_REMEMBERED = 4096;

  private final SessionWorkspaces workspaces;
  private final Map<String, Session> sessions = new ConcurrentHashMap<>();
  private final Set<String> ended =
      Collections.synchronizedSet(
          Collections.newSetFromMap(
              new LinkedHashMap<>() {
                @Override
                protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
                  return size() > ENDED_REMEMBERED;
                }
              }));

  HttpSessions(SessionWorkspaces workspaces) {
    this.workspaces = Objects.requireNonNull(workspaces, "workspaces");
  }

  /**
   * The workspace of session {@code id}, opened now with {@code request} if this is its first call.
   *
   * @throws SessionEndedException if the session has ended
   */
  Workspace workspace(String id, HttpServletRequest request) {
    Objects.requireNonNull(id, "session id");
    Session session = sessions.computeIfAbsent(id, Session::new);
    if (ended.contains(id)) {
      sessions.remove(id, session);
      session.end();
      throw new SessionEndedException(id);
    }
    return session.workspace(request);
  }

  /** Whether {@code id} named a session that has ended. */
  boolean hasEnded(String id) {
    return ended.contains(id);
  }

  /** Ends session {@code id}: closes its workspace, if it opened one. Idempotent. */
  void end(String id) {
    ended.add(id);
    Session session = sessions.remove(id);
    if (session != null) {
      session.end();
    }
  }

  /** Ends every session; a failure to close one does not keep the others open. */
  void endAll() {
    List<String> ids = new ArrayList<>(sessions.keySet());
    RuntimeException failure = null;
    for (String id : ids) {
      try {
        end(id);
      } catch (RuntimeException e) {
        if (failure == null) {
          failure = e;
        } else {
          failure.addSuppressed(e);
        }
      }
    }
    if (failure != null) {
      throw failure;
    }
  }

  /** Raised by a tool call of a session that has ended. */
  static final class SessionEndedException extends RuntimeException {
    SessionEndedException(String id) {
      super("the MCP session " + id + " has ended: start a new session");
    }
  }

  private final class Session {
    private final String id;
    private Workspace workspace; // guarded by this
    private boolean ended; // guarded by this

    Session(String id) {
      this.id = id;
    }

    synchronized Workspace workspace(HttpServletRequest request) {
      if (ended) {
        throw new SessionEndedException(id);
      }
      if (workspace == null) {
        workspace =
            Objects.requireNonNull(
                workspaces.open(request), "SessionWorkspaces.open returned null");
      }
      return workspace;
    }

    synchronized void end() {
      if (ended) {
        return;
      }
      ended = true;
      if (workspace != null) {
        workspaces.close(workspace);
      }
    }
  }
}
