package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
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
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.eclipse.jetty.ee10.websocket.server.JettyWebSocketServerContainer;

/**
 * The HTTP API of docs/server-api.md: one route table ({@link #routes()}, which the OpenAPI test
 * compares with the served document), key authentication, error mapping, and a log line and metrics
 * per request.
 */
final class ApiServlet extends HttpServlet {

  private static final long serialVersionUID = 1L;
  private static final int DEFAULT_PAGE = 50;
  private static final int MAX_PAGE = 500;
  static final int MAX_COMMANDS_PER_ORGANIZATION = 100;

  /**
   * The request log's route for one command over an exec WebSocket: the upgrade has a line of its
   * own, and a kept-open socket carries many commands.
   */
  static final String EXEC_COMMAND_ROUTE = "/v1/sandboxes/{id}/exec (command)";

  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();

  private final transient Sandboxes sandboxes;
  private final transient Database db;
  private final transient Metrics metrics;
  private final transient RequestLog log;
  private final transient ActiveExecs active;
  private final long maxJsonBytes;
  private final Duration keepAlive;
  private final transient WebSocketEndpoints.ExecSocketIdle execSocketIdle;
  private final transient List<Route> routes;
  private final transient Map<String, Background> commands = new ConcurrentHashMap<>();
  private final byte[] openApi;

  /** A background command and whose it is. */
  private record Background(long organization, String sandbox, BackgroundCommand command) {}

  ApiServlet(
      Sandboxes sandboxes,
      Database db,
      Metrics metrics,
      RequestLog log,
      ActiveExecs active,
      long maxJsonBytes,
      Duration keepAlive,
      WebSocketEndpoints.ExecSocketIdle execSocketIdle) {
    this.keepAlive = keepAlive;
    this.execSocketIdle = execSocketIdle;
    this.sandboxes = sandboxes;
    this.db = db;
    this.metrics = metrics;
    this.log = log;
    this.active = active;
    this.maxJsonBytes = maxJsonBytes;
    this.routes = buildRoutes();
    try (InputStream in = ApiServlet.class.getResourceAsStream("openapi.json")) {
      this.openApi = in.readAllBytes();
    } catch (IOException | NullPointerException e) {
      throw new IllegalStateException("the OpenAPI document is missing from the jar", e);
    }
  }

  List<Route> routes() {
    return routes;
  }

  private List<Route> buildRoutes() {
    List<Route> r = new ArrayList<>();
    r.add(new Route("GET", "/healthz", false, this::health));
    r.add(new Route("GET", "/metrics", false, this::metrics));
    r.add(new Route("GET", "/v1/openapi.json", false, this::openApi));
    r.add(new Route("POST", "/v1/sandboxes", true, this::create));
    r.add(new Route("GET", "/v1/sandboxes", true, this::list));
    r.add(new Route("GET", "/v1/sandboxes/{id}", true, this::get));
    r.add(new Route("DELETE", "/v1/sandboxes/{id}", true, this::delete));
    for (String op : List.of("suspend", "resume", "stop", "start", "hibernate")) {
      r.add(new Route("POST", "/v1/sandboxes/{id}/" + op, true, c -> lifecycle(c, op)));
    }
    r.add(new Route("POST", "/v1/sandboxes/{id}/fork", true, this::fork));
    r.add(new Route("POST", "/v1/sandboxes/{id}/snapshots", true, this::snapshot));
    r.add(new Route("GET", "/v1/snapshots", true, this::snapshots));
    r.add(new Route("GET", "/v1/images", true, this::images));
    r.add(new Route("DELETE", "/v1/snapshots/{name}", true, this::deleteSnapshot));
    SandboxEgress egress = new SandboxEgress(sandboxes);
    r.add(new Route("GET", "/v1/sandboxes/{id}/egress", true, egress::get));
    r.add(new Route("PUT", "/v1/sandboxes/{id}/egress", true, egress::put));
    r.add(new Route("POST", "/v1/sandboxes/{id}/exec", true, this::exec));
    r.add(new Route("GET", "/v1/sandboxes/{id}/exec", true, this::execSocket));
    r.add(new Route("POST", "/v1/sandboxes/{id}/commands", true, this::startCommand));
    r.add(new Route("GET", "/v1/sandboxes/{id}/commands/{cid}", true, this::pollCommand));
    r.add(new Route("POST", "/v1/sandboxes/{id}/commands/{cid}/stop", true, this::stopCommand));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/content", true, this::readFile));
    r.add(new Route("PUT", "/v1/sandboxes/{id}/files/content", true, this::writeFile));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/stat", true, this::stat));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/list", true, this::listFiles));
    r.add(new Route("GET", "/v1/sandboxes/{id}/files/realpath", true, this::realpath));
    r.add(new Route("POST", "/v1/sandboxes/{id}/files/mkdir", true, this::mkdir));
    r.add(new Route("POST", "/v1/sandboxes/{id}/files/remove", true, this::remove));
    r.add(new Route("POST", "/v1/sandboxes/{id}/files/rename", true, this::rename));
    return List.copyOf(r);
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
    try {
      if (route == null) {
        throw pathMatched
            ? new ApiException(
                405, "method_not_allowed", method + " is not allowed here", null, null, null)
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

  Organization authenticate(HttpServletRequest request) {
    return organizationOfKey(keyHash(request));
  }

  /**
   * The hash of the API key in the request's {@code Authorization} header (null for a header that
   * cannot hold one of our keys), or {@code unauthenticated} without such a header.
   */
  private static String keyHash(HttpServletRequest request) {
    String header = request.getHeader("Authorization");
    if (header == null || !header.regionMatches(true, 0, "Bearer ", 0, 7)) {
      throw new ApiException(
          401, "unauthenticated", "send an API key: Authorization: Bearer <key>", null, null, null);
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
                401, "unauthenticated", "unknown or revoked API key", null, null, null));
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
    inner.put("code", error.code);
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
      case WorkspaceNoSuchFileException f -> file(404, "no_such_file", f);
      case WorkspaceFileAlreadyExistsException f -> file(409, "already_exists", f);
      case WorkspaceIsDirectoryException f -> file(409, "is_directory", f);
      case WorkspaceNotDirectoryException f -> file(409, "not_directory", f);
      case WorkspaceDirectoryNotEmptyException f -> file(409, "directory_not_empty", f);
      case WorkspaceAccessDeniedException f -> file(403, "access_denied", f);
      case WorkspaceFileException f -> file(409, "file_error", f);
      case WorkspaceUnavailableException u -> ApiException.unavailable(u.getMessage());
      case dev.sandbox4j.runtime.InsufficientDiskException d ->
          new ApiException(503, "insufficient_disk", d.getMessage(), null, null, null);
      case WorkspaceTimeoutException t ->
          new ApiException(408, "timeout", t.getMessage(), null, null, null);
      case WorkspaceException w ->
          new ApiException(500, "internal", w.getMessage(), null, null, null);
      case IllegalArgumentException i -> ApiException.invalid(null, i.getMessage());
      default ->
          new ApiException(
              500,
              "internal",
              e.getClass().getSimpleName() + ": " + e.getMessage(),
              null,
              null,
              null);
    };
  }

  private static ApiException file(int status, String code, WorkspaceFileException e) {
    return new ApiException(status, code, e.getMessage(), null, e.path(), null);
  }

  // ---- open routes ---------------------------------------------------------------------------

  private void health(Call c) throws IOException {
    c.response.setContentType("text/plain");
    c.response.getOutputStream().write("ok".getBytes(StandardCharsets.US_ASCII));
  }

  private void metrics(Call c) throws IOException {
    c.response.setContentType("text/plain; version=0.0.4; charset=utf-8");
    metrics.write(c.response.getOutputStream());
  }

  private void openApi(Call c) throws IOException {
    c.response.setContentType("application/json");
    c.response.getOutputStream().write(openApi);
  }

  // ---- sandboxes -----------------------------------------------------------------------------

  private void create(Call c) throws IOException {
    Sandboxes.CreateSpec spec = c.body(Sandboxes.CreateSpec.class, null);
    c.json(201, sandbox(sandboxes.create(c.organization, spec)));
  }

  private void list(Call c) throws IOException {
    c.onlyQuery(Set.of("label", "state", "limit", "cursor"));
    Map<String, String> labels = new LinkedHashMap<>();
    String[] given = c.request.getParameterValues("label");
    if (given != null) {
      if (given.length > Sandboxes.MAX_LABELS) {
        throw ApiException.invalid(
            "label", "at most " + Sandboxes.MAX_LABELS + " label filters, was " + given.length);
      }
      for (String l : given) {
        int eq = l.indexOf('=');
        if (eq <= 0) {
          throw ApiException.invalid(
              "label", "a label filter is key=value, was '" + Sandboxes.printable(l) + "'");
        }
        labels.put(l.substring(0, eq), l.substring(eq + 1));
      }
    }
    String state = single(c, "state");
    if (state != null && !Sandboxes.STATES.contains(state)) {
      throw ApiException.invalid(
          "state",
          "state must be one of "
              + new java.util.TreeSet<>(Sandboxes.STATES)
              + ", was '"
              + Sandboxes.printable(state)
              + "'");
    }
    int limit = DEFAULT_PAGE;
    String limitText = single(c, "limit");
    if (limitText != null) {
      try {
        limit = Integer.parseInt(limitText);
      } catch (NumberFormatException e) {
        limit = -1;
      }
      if (limit < 1 || limit > MAX_PAGE) {
        throw ApiException.invalid(
            "limit",
            "limit must be an integer from 1 to "
                + MAX_PAGE
                + ", was '"
                + Sandboxes.printable(limitText)
                + "'");
      }
    }
    String after = null;
    String cursor = single(c, "cursor");
    if (cursor != null) {
      try {
        after = new String(Base64.getUrlDecoder().decode(cursor), StandardCharsets.UTF_8);
      } catch (IllegalArgumentException e) {
        after = null;
      }
      if (after == null || !Sandboxes.ID.matcher(after).matches()) {
        throw ApiException.invalid("cursor", "cursor is not one this server gave out");
      }
    }
    Sandboxes.Page page = sandboxes.list(c.organization, labels, state, limit, after);
    ObjectNode body = Json.object();
    ArrayNode items = body.putArray("items");
    page.items().forEach(v -> items.add(sandbox(v)));
    if (page.more()) {
      body.put(
          "nextCursor",
          Base64.getUrlEncoder()
              .withoutPadding()
              .encodeToString(page.lastId().getBytes(StandardCharsets.UTF_8)));
    } else {
      body.putNull("nextCursor");
    }
    c.json(200, body);
  }

  private static String single(Call c, String name) {
    String[] values = c.request.getParameterValues(name);
    if (values == null) {
      return null;
    }
    if (values.length != 1) {
      throw ApiException.invalid(name, name + " may be given once");
    }
    return values[0];
  }

  private void get(Call c) throws IOException {
    Sandboxes.View view = sandboxes.get(c.organization, c.param("id"));
    if (view.info() == null) {
      throw ApiException.unavailable(
          "sandbox '" + c.param("id") + "' is gone (destroyed, e.g. by one of its timers)");
    }
    c.json(200, sandbox(view));
  }

  private void delete(Call c) {
    String id = c.param("id");
    sandboxes.delete(c.organization, id);
    commands.values().removeIf(b -> b.sandbox().equals(id));
    c.noContent();
  }

  private void lifecycle(Call c, String operation) throws IOException {
    c.json(200, sandbox(sandboxes.lifecycle(c.organization, c.param("id"), operation)));
  }

  /** The body of a fork. */
  record ForkRequest(Boolean filesOnly) {}

  private void fork(Call c) throws IOException {
    ForkRequest request = c.body(ForkRequest.class, new ForkRequest(false));
    Sandboxes.Fork fork =
        sandboxes.fork(c.organization, c.param("id"), Boolean.TRUE.equals(request.filesOnly()));
    ForkResult r = fork.result();
    ObjectNode body = Json.object();
    body.set("sandbox", sandbox(fork.sandbox()));
    body.put("processesCopied", r.processesCopied());
    body.put("reason", r.reason());
    ArrayNode notCarried = body.putArray("notCarried");
    r.notCarried().forEach(notCarried::add);
    c.json(201, body);
  }

  /** The body of a snapshot. */
  record SnapshotRequest(String name) {}

  private void snapshot(Call c) throws IOException {
    SnapshotRequest request = c.body(SnapshotRequest.class, null);
    c.json(201, snapshot(sandboxes.snapshot(c.organization, c.param("id"), request.name())));
  }

  private void snapshots(Call c) throws IOException {
    c.onlyQuery(Set.of());
    ObjectNode body = Json.object();
    ArrayNode items = body.putArray("items");
    sandboxes.snapshots(c.organization).forEach(s -> items.add(snapshot(s)));
    c.json(200, body);
  }

  private void images(Call c) throws IOException {
    c.onlyQuery(Set.of());
    ObjectNode body = Json.object();
    ArrayNode items = body.putArray("items");
    for (ImageInfo i : sandboxes.images()) {
      items
          .addObject()
          .put("name", i.name())
          .put("created", i.created().toString())
          .put("sizeBytes", i.sizeBytes())
          .put("description", i.description());
    }
    c.json(200, body);
  }

  private void deleteSnapshot(Call c) {
    sandboxes.deleteSnapshot(c.organization, c.param("name"));
    c.noContent();
  }

  // ---- commands ------------------------------------------------------------------------------

  private void exec(Call c) throws IOException {
    ExecRequest request = c.body(ExecRequest.class, null);
    var command = request.command();
    RunOptions.Builder options = request.options();
    byte[] stdin = request.stdinBytes();
    if (stdin != null) {
      options.stdin(stdin);
    }
    Workspace ws = sandboxes.workspace(c.organization, c.param("id"));
    ws.workingDirectory(); // attach (and wake) now: a gone sandbox is still a plain error answer
    c.response.setStatus(200);
    c.response.setContentType("application/x-ndjson");
    OutputStream out = c.response.getOutputStream();
    ExecRun run =
        new ExecRun(
            ws,
            command,
            options,
            event -> {
              synchronized (out) {
                out.write(Json.MAPPER.writeValueAsBytes(event));
                out.write('\n');
                out.flush();
              }
            },
            metrics);
    active.add(run);
    Thread keeper =
        Thread.ofVirtual()
            .name("sandbox4j-exec-keepalive")
            .start(
                () -> {
                  try {
                    while (true) {
                      Thread.sleep(keepAlive);
                      run.keepAlive();
                    }
                  } catch (InterruptedException e) {
                    // the command ended
                  }
                });
    try {
      out.flush(); // the status line now: the client knows the command started
      run.run();
    } finally {
      keeper.interrupt();
      active.remove(run);
    }
  }

  private void execSocket(Call c) throws IOException {
    c.onlyQuery(Set.of("keepOpen"));
    String keepOpenText = single(c, "keepOpen");
    if (keepOpenText != null && !keepOpenText.equals("true") && !keepOpenText.equals("false")) {
      throw ApiException.invalid("keepOpen", "keepOpen is true or false");
    }
    boolean keepOpen = "true".equals(keepOpenText);
    Organization organization = c.organization;
    String id = c.param("id");
    Workspace ws = sandboxes.workspace(organization, id);
    String upgrade = c.request.getHeader("Upgrade");
    if (upgrade == null || !upgrade.equalsIgnoreCase("websocket")) {
      throw ApiException.invalid(
          null, "GET .../exec is a WebSocket upgrade; POST it for an NDJSON stream");
    }
    // attaches or wakes it now: a gone sandbox is an HTTP error, not a WebSocket one
    ws.workingDirectory();
    String keyHash = keyHash(c.request); // the key itself is not kept for the socket's life
    WebSocketEndpoints.ExecSocket.Access access =
        new WebSocketEndpoints.ExecSocket.Access() {
          @Override
          public Workspace recheck() {
            Organization now = organizationOfKey(keyHash);
            if (now.id() != organization.id()) {
              throw new ApiException(
                  401, "unauthenticated", "unknown or revoked API key", null, null, null);
            }
            return sandboxes.workspace(now, id);
          }

          @Override
          public void log(int status, long millis) {
            metrics.request("WS", EXEC_COMMAND_ROUTE, status);
            log.request("WS", EXEC_COMMAND_ROUTE, organization.name(), id, status, millis);
          }
        };
    JettyWebSocketServerContainer container =
        JettyWebSocketServerContainer.getContainer(getServletContext());
    if (!container.upgrade(
        (req, resp) ->
            new WebSocketEndpoints.ExecSocket(
                ws, keepOpen, execSocketIdle, access, metrics, active),
        c.request,
        c.response)) {
      throw ApiException.invalid(null, "the WebSocket upgrade failed");
    }
  }

  private void startCommand(Call c) throws IOException {
    ExecRequest request = c.body(ExecRequest.class, null);
    var command = request.command();
    RunOptions.Builder options = request.options().retainOutput(true);
    byte[] stdin = request.stdinBytes();
    if (stdin != null) {
      options.stdin(stdin);
    }
    String sandbox = c.param("id");
    Workspace ws = sandboxes.workspace(c.organization, sandbox);
    long organization = c.organization.id();
    // each holds up to 1 MiB of unread output in memory: bound how many one organization keeps
    if (commands.values().stream().filter(b -> b.organization() == organization).count()
        >= MAX_COMMANDS_PER_ORGANIZATION) {
      throw new ApiException(
          429,
          "quota_exceeded",
          "the organization has "
              + MAX_COMMANDS_PER_ORGANIZATION
              + " background commands not yet collected: stop some, or GET them until they end",
          null,
          null,
          null);
    }
    BackgroundCommand started = ws.start(command, options.build());
    byte[] idBytes = new byte[12];
    RANDOM.nextBytes(idBytes);
    String id = HexFormat.of().formatHex(idBytes);
    commands.put(id, new Background(c.organization.id(), sandbox, started));
    c.json(201, Json.object().put("id", id));
  }

  private Background command(Call c) {
    String sandbox = sandboxes.owned(c.organization, c.param("id")).id();
    Background b = commands.get(c.param("cid"));
    if (b == null || b.organization() != c.organization.id() || !b.sandbox().equals(sandbox)) {
      throw ApiException.notFound("no command '" + Sandboxes.printable(c.param("cid")) + "'");
    }
    return b;
  }

  private void pollCommand(Call c) throws IOException {
    Background b = command(c);
    ObjectNode body = commandState(c.param("cid"), b.command());
    if (!b.command().isRunning()) {
      commands.remove(c.param("cid"), b); // its last output is in this answer
    }
    c.json(200, body);
  }

  private void stopCommand(Call c) throws IOException, InterruptedException {
    Background b = command(c);
    b.command().stop(Duration.ofSeconds(2));
    b.command().await(Duration.ofSeconds(10));
    ObjectNode body = commandState(c.param("cid"), b.command());
    commands.remove(c.param("cid"), b);
    c.json(200, body);
  }

  private static ObjectNode commandState(String id, BackgroundCommand command) {
    boolean running = command.isRunning();
    BackgroundCommand.Output output = command.takeOutput();
    ObjectNode body = Json.object();
    body.put("id", id);
    body.put("running", running);
    if (!running && command.exitCode().isPresent()) {
      body.put("exitCode", command.exitCode().getAsInt());
    } else {
      body.putNull("exitCode");
    }
    body.put("stdout", Base64.getEncoder().encodeToString(output.stdout()));
    body.put("stderr", Base64.getEncoder().encodeToString(output.stderr()));
    body.put("droppedBytes", output.droppedBytes());
    Optional<WorkspaceException> failure = running ? Optional.empty() : command.failure();
    if (failure.isPresent()) {
      ApiException mapped = map(failure.get());
      String code =
          switch (failure.get()) {
            case dev.sandbox4j.workspace.WorkspaceOutputLimitException l -> "output_limit";
            default -> mapped.code;
          };
      ObjectNode error = body.putObject("error");
      error.put("code", code);
      error.put("message", failure.get().getMessage());
      if (failure.get() instanceof WorkspaceTimeoutException t) {
        error.put("timeoutMs", t.timeout().toMillis());
      }
      if (failure.get() instanceof dev.sandbox4j.workspace.WorkspaceOutputLimitException l) {
        error.put("limitBytes", l.limit());
      }
    } else {
      body.putNull("error");
    }
    return body;
  }

  /** Kills the background commands started through this server: it is going away. */
  void killCommands() {
    for (Background b : commands.values()) {
      try {
        b.command().kill();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } catch (RuntimeException e) {
        // already gone
      }
    }
    commands.clear();
  }

  // ---- files ---------------------------------------------------------------------------------

  private Workspace workspace(Call c) {
    return sandboxes.workspace(c.organization, c.param("id"));
  }

  private void readFile(Call c) throws IOException {
    String path = c.pathQuery();
    Workspace ws = workspace(c);
    try (InputStream in = ws.openRead(path)) {
      // the first chunk before the status line: a failure to read is still a JSON error
      byte[] first = in.readNBytes(64 * 1024);
      c.response.setStatus(200);
      c.response.setContentType("application/octet-stream");
      OutputStream out = c.response.getOutputStream();
      out.write(first);
      in.transferTo(out);
    }
  }

  private void writeFile(Call c) throws IOException {
    String path = c.pathQuery();
    Workspace ws = workspace(c);
    try (InputStream in = c.request.getInputStream()) {
      ws.write(path, in);
    }
    c.noContent();
  }

  private void stat(Call c) throws IOException {
    String path = c.pathQuery();
    FileStat s = workspace(c).stat(path);
    ObjectNode body = Json.object();
    body.put("path", s.path());
    body.put("type", s.type().name());
    body.put("size", s.size());
    body.put("permissions", s.permissions());
    body.put("modified", s.modified() == null ? null : s.modified().toString());
    c.json(200, body);
  }

  private void listFiles(Call c) throws IOException {
    String path = c.pathQuery();
    ObjectNode body = Json.object();
    ArrayNode entries = body.putArray("entries");
    for (DirectoryEntry e : workspace(c).list(path)) {
      entries.addObject().put("name", e.name()).put("type", e.type().name()).put("size", e.size());
    }
    c.json(200, body);
  }

  private void realpath(Call c) throws IOException {
    String path = c.pathQuery();
    c.json(200, Json.object().put("path", workspace(c).realpath(path)));
  }

  /** The body of mkdir. */
  record PathRequest(String path) {}

  /** The body of remove. */
  record RemoveRequest(String path, Boolean recursive) {}

  /** The body of rename. */
  record RenameRequest(String from, String to) {}

  private void mkdir(Call c) throws IOException {
    PathRequest r = c.body(PathRequest.class, null);
    workspace(c).createDirectories(Call.checkPath("path", r.path()));
    c.noContent();
  }

  private void remove(Call c) throws IOException {
    RemoveRequest r = c.body(RemoveRequest.class, null);
    workspace(c).remove(Call.checkPath("path", r.path()), Boolean.TRUE.equals(r.recursive()));
    c.noContent();
  }

  private void rename(Call c) throws IOException {
    RenameRequest r = c.body(RenameRequest.class, null);
    workspace(c).rename(Call.checkPath("from", r.from()), Call.checkPath("to", r.to()));
    c.noContent();
  }

  // ---- JSON views ----------------------------------------------------------------------------

  private static ObjectNode sandbox(Sandboxes.View v) {
    ObjectNode o = Json.object();
    String id = v.row().id();
    o.put("id", id);
    o.put("ref", "remote:" + id);
    SandboxInfo info = v.info();
    o.put("state", info == null ? "destroyed" : info.state());
    o.put(
        "image", info == null ? null : Sandboxes.shownImage(v.row().organization(), info.image()));
    o.put("created", info == null ? v.row().created() : info.created().toString());
    ObjectNode labels = o.putObject("labels");
    Sandboxes.labels(v.row()).forEach(labels::put);
    if (info != null) {
      o.put("cpus", info.cpus());
      o.put("memoryBytes", info.memoryBytes());
      o.put("pids", info.pids());
    }
    o.put(
        "workingDirectory",
        v.row().workingDirectory() == null ? "/home/sandbox" : v.row().workingDirectory());
    SandboxTimers t = info == null ? null : info.timers();
    if (t == null) {
      o.putNull("timers");
    } else {
      ObjectNode timers = o.putObject("timers");
      putMillis(timers, "autoSuspendTimeoutMs", t.autoSuspendTimeout());
      putMillis(timers, "sandboxTimeoutMs", t.sandboxTimeout());
      putMillis(timers, "idleTimeoutMs", t.idleTimeout());
      putInstant(timers, "deleteAfter", t.deleteAfter());
      putInstant(timers, "ends", t.ends());
    }
    return o;
  }

  private static void putMillis(ObjectNode o, String field, Duration d) {
    if (d == null || d.isZero()) {
      o.putNull(field);
    } else {
      o.put(field, d.toMillis());
    }
  }

  private static void putInstant(ObjectNode o, String field, Instant i) {
    if (i == null) {
      o.putNull(field);
    } else {
      o.put(field, i.toString());
    }
  }

  private static JsonNode snapshot(Sandboxes.Snapshot s) {
    SnapshotInfo info = s.info();
    ObjectNode o = Json.object();
    o.put("name", s.row().name());
    o.put("created", info.created().toString());
    o.put("source", s.row().source());
    o.put("image", Sandboxes.shownImage(s.row().organization(), info.image()));
    o.put("cpus", info.cpus());
    o.put("memoryBytes", info.memoryBytes());
    o.put("pids", info.pids());
    o.put("sizeBytes", info.sizeBytes());
    return o;
  }
}
