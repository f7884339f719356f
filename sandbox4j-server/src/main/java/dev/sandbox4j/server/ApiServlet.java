package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.Scope;
import io.opentelemetry.context.propagation.TextMapGetter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The HTTP API of docs/server-api.md: one route table ({@link #routes()}, which the OpenAPI test
 * compares with the served document), key authentication, error mapping, and a log line and metrics
 * per request. The handlers live with their resource: {@link OpenRoutes}, {@link SandboxRoutes},
 * {@link SnapshotRoutes}, {@link ExecRoutes}, {@link CommandRoutes} and {@link FileRoutes}.
 */
final class ApiServlet extends HttpServlet {

  private static final long serialVersionUID = 1L;

  /**
   * The request log's route for one command over an exec WebSocket: the upgrade has a line of its
   * own, and a kept-open socket carries many commands.
   */
  static final String EXEC_COMMAND_ROUTE = "/v1/sandboxes/{id}/exec (command)";

  private final transient Database db;
  private final transient Metrics metrics;
  private final transient SandboxTelemetry telemetry;
  private final transient RequestLog log;
  private final long maxJsonBytes;
  private final transient OpenRoutes open;
  private final transient SandboxRoutes sandboxRoutes;
  private final transient SnapshotRoutes snapshotRoutes;
  private final transient ExecRoutes exec;
  private final transient CommandRoutes commands;
  private final transient FileRoutes files;
  private final transient EgressRoutes egress;
  private final transient List<Route> routes;

  // The request bodies stay here, not with their routes: Jackson names their class in the message
  // of a body of the wrong shape (a JSON array, say), and that message is part of the answer.

  /** The body of a fork. */
  record ForkRequest(Boolean filesOnly) {}

  /** The body of a snapshot. */
  record SnapshotRequest(String name) {}

  /** The body of mkdir. */
  record PathRequest(String path) {}

  /** The body of remove. */
  record RemoveRequest(String path, Boolean recursive) {}

  /** The body of rename. */
  record RenameRequest(String from, String to) {}

  ApiServlet(
      Sandboxes sandboxes,
      Database db,
      Metrics metrics,
      RequestLog log,
      ActiveExecs active,
      long maxJsonBytes,
      Duration keepAlive,
      WebSocketEndpoints.ExecSocketIdle execSocketIdle) {
    this.db = db;
    this.metrics = metrics;
    this.telemetry = sandboxes.telemetry();
    this.log = log;
    this.maxJsonBytes = maxJsonBytes;
    byte[] openApi;
    try (InputStream in = ApiServlet.class.getResourceAsStream("openapi.json")) {
      openApi = in.readAllBytes();
    } catch (IOException | NullPointerException e) {
      throw new IllegalStateException("the OpenAPI document is missing from the jar", e);
    }
    this.open = new OpenRoutes(metrics, openApi);
    this.commands = new CommandRoutes(sandboxes);
    this.sandboxRoutes = new SandboxRoutes(sandboxes, commands);
    this.snapshotRoutes = new SnapshotRoutes(sandboxes);
    this.exec =
        new ExecRoutes(
            sandboxes,
            metrics,
            log,
            active,
            keepAlive,
            execSocketIdle,
            this::organizationOfKey,
            this::getServletContext);
    this.files = new FileRoutes(sandboxes);
    this.egress = new EgressRoutes(sandboxes);
    this.routes = buildRoutes();
  }

  List<Route> routes() {
    return routes;
  }

  private List<Route> buildRoutes() {
    List<Route> r = new ArrayList<>();
    r.add(new Route("GET", "/healthz", false, open::health));
    r.add(new Route("GET", "/metrics", false, open::metrics));
    r.add(new Route("GET", "/v1/openapi.json", false, open::openApi));
    r.add(new Route("POST", "/v1/sandboxes", true, sandboxRoutes::create));
    r.add(new Route("GET", "/v1/sandboxes", true, sandboxRoutes::list));
    r.add(new Route("GET", "/v1/sandboxes/{id}", true, sandboxRoutes::get));
    r.add(new Route("DELETE", "/v1/sandboxes/{id}", true, sandboxRoutes::delete));
    for (String op : List.of("suspend", "resume", "stop", "start", "hibernate")) {
      r.add(
          new Route("POST", "/v1/sandboxes/{id}/" + op, true, c -> sandboxRoutes.lifecycle(c, op)));
    }
    r.add(new Route("POST", "/v1/sandboxes/{id}/fork", true, sandboxRoutes::fork));
    r.add(new Route("POST", "/v1/sandboxes/{id}/snapshots", true, snapshotRoutes::snapshot));
    r.add(new Route("GET", "/v1/snapshots", true, snapshotRoutes::snapshots));
    r.add(new Route("GET", "/v1/images", true, snapshotRoutes::images));
    r.add(new Route("DELETE", "/v1/snapshots/{name}", true, snapshotRoutes::deleteSnapshot));
    r.add(new Route("GET", "/v1/sandboxes/{id}/egress", true, egress::get));
    r.add(new Route("PUT", "/v1/sandboxes/{id}/egress", true, egress::put));
    r.add(new Route("POST", "/v1/sandboxes/{id}/exec", true, exec::exec));
    r.add(new Route("GET", "/v1/sandboxes/{id}/exec", true, exec::execSocket));
    r.add(new Route("POST", "/v1/sandboxes/{id}/commands", true, commands::startCommand));
    r.add(new Route("GET", "/v1/sandboxes/{id}/commands/{cid}", true, commands::pollCommand));
    r.add(new Route("POST", "/v1/sandboxes/{id}/commands/{cid}/stop", true, commands::stopCommand));
    r.add(new Route("POST", "/v1/sandboxes/{id}/commands/{cid}/stdin", true, commands::writeStdin));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/content", true, files::readFile));
    r.add(new Route("PUT", "/v1/sandboxes/{id}/files/content", true, files::writeFile));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/stat", true, files::stat));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/list", true, files::listFiles));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/realpath", true, files::realpath));
    r.add(new Route("POST", "/v1/sandboxes/{id}/files/mkdir", true, files::mkdir));
    r.add(new Route("POST", "/v1/sandboxes/{id}/files/remove", true, files::remove));
    r.add(new Route("POST", "/v1/sandboxes/{id}/files/rename", true, files::rename));
    return List.copyOf(r);
  }

  /** Kills the background commands started through this server: it is going away. */
  void killCommands() {
    commands.killCommands();
  }

  // ---- dispatch ------------------------------------------------------------------------------

  @Override
  protected void service(HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    long start = System.nanoTime();
    String method = request.getMethod();
    List<String> path = List.of(request.getRequestURI().substring(1).split("/", -1));
    Route route = null;
    Map<String, String> params = null;
    boolean pathMatched = false;
    for (Route candidate : routes) {
      Map<String, String> bound = candidate.match(path);
      if (bound != null) {
        pathMatched = true;
        if (candidate.method().equals(method)) {
          route = candidate;
          params = bound;
          break;
        }
      }
    }
    Call call = new Call(request, response, params == null ? Map.of() : params, maxJsonBytes);
    String template = route == null ? "unmatched" : route.template();
    Span span = serverSpan(request, method, template);
    try (Scope ignored = span.makeCurrent()) {
      if (route == null) {
        throw pathMatched
            ? new ApiException(
                ErrorCode.METHOD_NOT_ALLOWED, method + " is not allowed here", null, null, null)
            : ApiException.notFound(
                "no route " + method + " " + Sandboxes.printable(request.getRequestURI()));
      }
      if (route.authenticated()) {
        call.organization = authenticate(request);
      }
      route.handler().handle(call);
    } catch (Exception e) {
      fail(call, e);
    } finally {
      int status = response.getStatus();
      endServerSpan(span, status);
      metrics.request(method, template, status);
      log.request(
          method,
          template,
          call.organization == null ? null : call.organization.name(),
          call.param("id"),
          status,
          (System.nanoTime() - start) / 1_000_000);
    }
  }

  /**
   * A server span {@code METHOD ROUTE} (HTTP semantic conventions), child of the W3C trace context
   * the client sent, extracted with the configured propagators.
   */
  private Span serverSpan(HttpServletRequest request, String method, String template) {
    io.opentelemetry.api.OpenTelemetry otel = telemetry.openTelemetry();
    Context parent =
        otel.getPropagators().getTextMapPropagator().extract(Context.root(), request, HEADERS);
    Span span =
        telemetry
            .tracer()
            .spanBuilder("HTTP")
            .setParent(parent)
            .setSpanKind(SpanKind.SERVER)
            .startSpan();
    if (span.isRecording()) {
      span.updateName(method + " " + template);
      span.setAttribute(HTTP_METHOD, method);
      span.setAttribute(HTTP_ROUTE, template);
    }
    return span;
  }

  private static void endServerSpan(Span span, int status) {
    if (span.isRecording()) {
      span.setAttribute(HTTP_STATUS, status);
      if (status >= 500) {
        // a server span is an error for a 5xx only (HTTP conventions): a 4xx is the client's
        span.setStatus(StatusCode.ERROR);
        span.setAttribute(SandboxTelemetry.ERROR_TYPE, Integer.toString(status));
      }
    }
    span.end();
  }

  static final AttributeKey<String> HTTP_METHOD = AttributeKey.stringKey("http.request.method");
  static final AttributeKey<String> HTTP_ROUTE = AttributeKey.stringKey("http.route");
  static final AttributeKey<Long> HTTP_STATUS = AttributeKey.longKey("http.response.status_code");

  /** Reads a request's headers for a propagator. */
  static final TextMapGetter<HttpServletRequest> HEADERS =
      new TextMapGetter<>() {
        @Override
        public Iterable<String> keys(HttpServletRequest carrier) {
          return java.util.Collections.list(carrier.getHeaderNames());
        }

        @Override
        public String get(HttpServletRequest carrier, String key) {
          return carrier == null ? null : carrier.getHeader(key);
        }
      };

  Organization authenticate(HttpServletRequest request) {
    return organizationOfKey(keyHash(request));
  }

  /**
   * The hash of the API key in the request's {@code Authorization} header (null for a header that
   * cannot hold one of our keys), or {@code unauthenticated} without such a header.
   */
  static String keyHash(HttpServletRequest request) {
    String header = request.getHeader("Authorization");
    if (header == null || !header.regionMatches(true, 0, "Bearer ", 0, 7)) {
      throw new ApiException(
          ErrorCode.UNAUTHENTICATED,
          "send an API key: Authorization: Bearer <key>",
          null,
          null,
          null);
    }
    String key = header.substring(7).trim();
    return key.startsWith(ServerKeys.KEY_PREFIX) && key.length() < 200
        ? ServerKeys.hash(key)
        : null;
  }

  /** The organization of a valid key's hash, or {@code unauthenticated}. */
  private Organization organizationOfKey(String hash) {
    Optional<Organization> org = hash == null ? Optional.empty() : db.organizationOfKey(hash);
    return org.orElseThrow(
        () ->
            new ApiException(
                ErrorCode.UNAUTHENTICATED, "unknown or revoked API key", null, null, null));
  }

  private void fail(Call call, Exception e) throws IOException {
    ApiException error = map(e);
    metrics.error(error.code);
    if (call.response.isCommitted()) {
      // a stream already under way: cutting it is the only signal left
      throw new IOException("failed after the answer started: " + error.getMessage(), e);
    }
    call.response.reset();
    if (error.retryAfterSeconds != null) {
      call.response.setHeader("Retry-After", Long.toString(error.retryAfterSeconds));
    }
    ObjectNode body = Json.object();
    ObjectNode inner = body.putObject("error");
    inner.put("code", error.code.spelling());
    inner.put("message", error.getMessage());
    if (error.field != null) {
      inner.put("field", error.field);
    }
    if (error.path != null) {
      inner.put("path", error.path);
    }
    call.json(error.status, body);
  }

  static ApiException map(Exception e) {
    return switch (e) {
      case ApiException a -> a;
      case WorkspaceNoSuchFileException f -> file(ErrorCode.NO_SUCH_FILE, f);
      case WorkspaceFileAlreadyExistsException f -> file(ErrorCode.ALREADY_EXISTS, f);
      case WorkspaceIsDirectoryException f -> file(ErrorCode.IS_DIRECTORY, f);
      case WorkspaceNotDirectoryException f -> file(ErrorCode.NOT_DIRECTORY, f);
      case WorkspaceDirectoryNotEmptyException f -> file(ErrorCode.DIRECTORY_NOT_EMPTY, f);
      case WorkspaceAccessDeniedException f -> file(ErrorCode.ACCESS_DENIED, f);
      case WorkspaceFileException f -> file(ErrorCode.FILE_ERROR, f);
      case WorkspaceUnavailableException u -> ApiException.unavailable(u.getMessage());
      case dev.sandbox4j.runtime.InsufficientDiskException d ->
          new ApiException(ErrorCode.INSUFFICIENT_DISK, d.getMessage(), null, null, null);
      case WorkspaceTimeoutException t ->
          new ApiException(ErrorCode.TIMEOUT, t.getMessage(), null, null, null);
      case WorkspaceException w ->
          new ApiException(ErrorCode.INTERNAL, w.getMessage(), null, null, null);
      case IllegalArgumentException i -> ApiException.invalid(null, i.getMessage());
      default ->
          new ApiException(
              ErrorCode.INTERNAL,
              e.getClass().getSimpleName() + ": " + e.getMessage(),
              null,
              null,
              null);
    };
  }

  private static ApiException file(ErrorCode code, WorkspaceFileException e) {
    return new ApiException(code, e.getMessage(), null, e.path(), null);
  }
}
