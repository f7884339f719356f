package dev.sandbox4j.mcp;

import dev.sandbox4j.workspace.Workspace;
import jakarta.servlet.http.HttpServletRequest;
import java.security.Principal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The MCP sessions of one HTTP endpoint: each one's owner, its workspace (opened on its first tool
 * call, closed once when the session ends), and what keeps it alive.
 *
 * <p>A session ends when the client deletes it, when the endpoint is destroyed, or when a {@link
 * #sweep} finds it idle: no request in flight (an open event stream counts as one) and none begun
 * since the previous sweep. That is the rule the SDK's transport uses to forget a session, so with
 * the same interval a session ends here about when the SDK forgets it.
 *
 * <p>A session belongs to the principal of the request that initialized it ({@link
 * HttpServletRequest#getUserPrincipal}, or none): requests of another principal naming it are
 * refused, as the MCP specification advises (a session id is not a credential).
 *
 * <p>State per session: absent (unknown here) → present (from its initialize; requests counted;
 * workspace opened on the first tool call) → ended (removed; {@link SessionWorkspaces#close} called
 * if a workspace was opened; its id remembered for as long as the SDK may still know it, so that
 * requests naming it are refused). {@code sessions} and {@code ended} are concurrent maps; each
 * {@link Session} guards its own fields with its monitor, so opening one session's workspace never
 * blocks another.
 */
final class HttpSessions {

  private final SessionWorkspaces workspaces;
  private final Map<String, Session> sessions = new ConcurrentHashMap<>();

  /** How long an ended id is refused: until the SDK's transport has surely forgotten it. */
  private final Duration rememberEnded;

  /** Ended ids, each with the {@link System#nanoTime} until which it is remembered. */
  private final Map<String, Long> ended = new ConcurrentHashMap<>();

  HttpSessions(SessionWorkspaces workspaces, Duration rememberEnded) {
    this.workspaces = Objects.requireNonNull(workspaces, "workspaces");
    this.rememberEnded = Objects.requireNonNull(rememberEnded, "rememberEnded");
  }

  /**
   * The workspace of session {@code id}, opened now with {@code request} if this is its first call.
   * Only for ids the SDK has accepted.
   *
   * @throws SessionEndedException if the session has ended
   */
  Workspace workspace(String id, HttpServletRequest request) {
    Objects.requireNonNull(id, "session id");
    Session session = session(id, principal(request));
    // the session's first use: count the request it arrived with, which began uncounted
    if (request.getAttribute(InFlight.ATTRIBUTE) instanceof InFlight inFlight
        && inFlight.session == null
        && session.begin()) {
      inFlight.session = session;
    }
    return session.workspace(request);
  }

  /** Whether {@code id} names a session that has ended. */
  boolean hasEnded(String id) {
    return ended.containsKey(id);
  }

  /** Records session {@code id}, just initialized by {@code request}, as its principal's. */
  void initialized(String id, HttpServletRequest request) {
    session(id, principal(request));
  }

  /**
   * Whether {@code request} may use session {@code id}: a session belongs to the principal ({@link
   * HttpServletRequest#getUserPrincipal}) that opened it, or to no one if there was none.
   */
  boolean mayUse(String id, HttpServletRequest request) {
    Session session = sessions.get(id);
    return session == null || Objects.equals(session.owner, principal(request));
  }

  private static String principal(HttpServletRequest request) {
    Principal principal = request.getUserPrincipal();
    return principal == null ? null : principal.getName();
  }

  /**
   * Counts a request of session {@code id} as begun, if the session is present, and returns what it
   * is counted in: keep it as the request's {@link InFlight#ATTRIBUTE} so that the session's first
   * use counts it too, and call {@link InFlight#done} when the request (or its stream) ends.
   */
  InFlight begin(String id) {
    Session session = sessions.get(id);
    return new InFlight(session != null && session.begin() ? session : null);
  }

  /** Counts {@code inFlight}, a request the SDK accepted for session {@code id}, if not yet. */
  void accepted(String id, HttpServletRequest request, InFlight inFlight) {
    if (inFlight.session == null && !ended.containsKey(id)) {
      String owner = principal(request);
      Session session = sessions.computeIfAbsent(id, key -> new Session(key, owner));
      if (session.begin()) {
        inFlight.session = session;
      }
    }
  }

  /** The session a request in flight is counted in, if any. Confined to the request's threads. */
  static final class InFlight {
    static final String ATTRIBUTE = "sandbox4j.mcp.inFlight";
    private volatile Session session;

    private InFlight(Session session) {
      this.session = session;
    }

    boolean counted() {
      return session != null;
    }

    /** Counts the request done. */
    void done() {
      Session s = session;
      if (s != null) {
        s.done();
      }
    }
  }

  /** Ends session {@code id}, if present: closes its workspace, if it opened one. Idempotent. */
  void end(String id) {
    Session session = sessions.get(id);
    if (session != null) {
      ended.put(id, System.nanoTime() + rememberEnded.toNanos());
      sessions.remove(id, session);
      session.end();
    }
  }

  /** Ends the sessions idle since the previous sweep; forgets ids ended long enough ago. */
  void sweep() {
    long now = System.nanoTime();
    ended.values().removeIf(until -> until - now < 0);
    endAll(List.copyOf(sessions.values()).stream().filter(Session::idleSinceLastSweep).toList());
  }

  /** Ends every session; a failure to close one does not keep the others open. */
  void endAll() {
    endAll(List.copyOf(sessions.values()));
  }

  private void endAll(List<Session> toEnd) {
    List<RuntimeException> failures = new ArrayList<>();
    for (Session session : toEnd) {
      try {
        end(session.id);
      } catch (RuntimeException e) {
        failures.add(e);
      }
    }
    if (!failures.isEmpty()) {
      RuntimeException first = failures.getFirst();
      failures.stream().skip(1).forEach(first::addSuppressed);
      throw first;
    }
  }

  private Session session(String id, String owner) {
    Session session = sessions.computeIfAbsent(id, key -> new Session(key, owner));
    if (ended.containsKey(id)) {
      // the session ended between the caller's check and now: undo the entry just made
      sessions.remove(id, session);
      session.end();
      throw new SessionEndedException(id);
    }
    return session;
  }

  /** Raised by a tool call of a session that has ended. */
  static final class SessionEndedException extends RuntimeException {
    SessionEndedException(String id) {
      super("the MCP session " + id + " has ended: start a new session");
    }
  }

  /** One session in use. */
  final class Session {
    private final String id;
    private final String owner;
    private Workspace workspace; // guarded by this
    private boolean ended; // guarded by this
    private int inFlight; // guarded by this
    private boolean active = true; // guarded by this: a request begun since the last sweep

    Session(String id, String owner) {
      this.id = id;
      this.owner = owner;
    }

    synchronized Workspace workspace(HttpServletRequest request) {
      if (ended) {
        throw new SessionEndedException(id);
      }
      active = true;
      if (workspace == null) {
        workspace =
            Objects.requireNonNull(
                workspaces.open(request), "SessionWorkspaces.open returned null");
      }
      return workspace;
    }

    synchronized boolean begin() {
      if (ended) {
        return false;
      }
      inFlight++;
      active = true;
      return true;
    }

    synchronized void done() {
      inFlight--;
    }

    synchronized boolean idleSinceLastSweep() {
      boolean idle = !active && inFlight == 0;
      active = false;
      return idle;
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
