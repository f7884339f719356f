package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * E2B's control plane (spec/openapi.yml of e2b-dev/E2B) over {@link Sandboxes}, scoped to the
 * organization of the {@code X-API-Key}: the routes the {@code e2b} SDK calls to create, connect,
 * list, inspect, pause, time and kill sandboxes. Errors are E2B's {@code {"code": status,
 * "message"}}, which the SDK turns into its typed errors by status.
 *
 * <p>E2B's sandbox timeout is kept here, in memory: a timer per sandbox kills it (or, created with
 * {@code autoPause}, pauses it) when it runs out; {@code setTimeout} and {@code connect} move it. A
 * server restart forgets the timers, and the sandboxes then run until killed (the engine's own
 * timers are fixed at creation, so they cannot carry a timeout that E2B lets clients change).
 */
final class E2bControlPlane {

  /** The envd version reported: what the SDK gates features on (see docs/e2b.md). */
  static final String ENVD_VERSION = "0.5.7";

  static final String TEMPLATE_LABEL = "e2b/template";
  private static final String BASE_TEMPLATE = "base";
  private static final long DEFAULT_TIMEOUT_SECONDS = 15; // the OpenAPI default
  private static final long MAX_TIMEOUT_SECONDS = 24 * 3600;

  private final Sandboxes sandboxes;
  private final E2bTokens tokens;
  private final E2bProcesses processes;
  private final Map<String, Deadline> deadlines = new ConcurrentHashMap<>();
  final Set<String> paused = ConcurrentHashMap.newKeySet();
  private final ScheduledExecutorService timers =
      Executors.newSingleThreadScheduledExecutor(
          Thread.ofPlatform().daemon().name("sandbox4j-e2b-timeouts").factory());

  private record Deadline(Instant end, boolean autoPause, ScheduledFuture<?> task) {}

  E2bControlPlane(Sandboxes sandboxes, E2bTokens tokens, E2bProcesses processes) {
    this.sandboxes = sandboxes;
    this.tokens = tokens;
    this.processes = processes;
  }

  void close() {
    timers.shutdownNow();
  }

  void handle(
      Organization org, List<String> path, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    String method = request.getMethod();
    String route = method + " /" + String.join("/", path);
    int n = path.size();
    if (n == 2 && path.get(0).equals("v2") && path.get(1).equals("sandboxes")) {
      switch (method) {
        case "POST" -> create(org, request, response);
        case "GET" -> list(org, request, response);
        default -> throw methodNotAllowed(method);
      }
    } else if (n == 4
        && path.get(0).equals("v2")
        && path.get(1).equals("sandboxes")
        && path.get(3).equals("connect")) {
      requireMethod(method, "POST");
      connect(org, path.get(2), request, response);
    } else if (n == 2 && path.get(0).equals("sandboxes")) {
      String id = path.get(1);
      switch (method) {
        case "GET" -> json(response, 200, detail(org, sandboxes.get(org, id)));
        case "DELETE" -> {
          kill(org, id);
          response.setStatus(204);
        }
        default -> throw methodNotAllowed(method);
      }
    } else if (n == 3 && path.get(0).equals("sandboxes")) {
      String id = path.get(1);
      switch (path.get(2)) {
        case "timeout" -> {
          requireMethod(method, "POST");
          sandboxes.owned(org, id);
          JsonNode body = body(request);
          schedule(org, id, seconds(body.path("timeout"), "timeout", null), autoPause(id));
          response.setStatus(204);
        }
        case "pause" -> {
          requireMethod(method, "POST");
          pause(org, id, response);
        }
        case "fork" -> {
          requireMethod(method, "POST");
          fork(org, id, request, response);
        }
        case "snapshots" -> {
          requireMethod(method, "POST");
          snapshot(org, id, request, response);
        }
        case "metrics" -> {
          requireMethod(method, "GET");
          sandboxes.owned(org, id);
          // the engine keeps no usage history to sample from: an empty series, as E2B answers for a
          // sandbox with no samples yet
          json(response, 200, Json.MAPPER.createArrayNode());
        }
        default -> throw notFoundRoute(route);
      }
    } else if (n == 1 && path.get(0).equals("snapshots")) {
      requireMethod(method, "GET");
      snapshots(org, request, response);
    } else if (n == 2 && path.get(0).equals("templates") && method.equals("DELETE")) {
      // the SDK's deleteSnapshot: a snapshot is a template in E2B
      sandboxes.deleteSnapshot(org, path.get(1));
      response.setStatus(204);
    } else {
      throw notFoundRoute(route);
    }
  }

  /**
   * E2B's fork: {@code count} copies of a running sandbox (Sandbox4j's fork, files and processes
   * where the engine carries them), each with its own timeout. One result per fork: the sandbox, or
   * the error that stopped it (quota, rate limit), as E2B reports them.
   */
  private void fork(
      Organization org, String id, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    JsonNode body = body(request);
    long timeout = seconds(body.path("timeout"), "timeout", DEFAULT_TIMEOUT_SECONDS);
    int count = 1;
    if (body.hasNonNull("count")) {
      if (!body.get("count").isIntegralNumber()
          || body.get("count").asInt() < 1
          || body.get("count").asInt() > 20) {
        throw ApiException.invalid("count", "count must be from 1 to 20, was " + body.get("count"));
      }
      count = body.get("count").asInt();
    }
    Sandboxes.View parent = sandboxes.get(org, id);
    if (paused.contains(id)) {
      throw new E2bError(409, "sandbox '" + id + "' is paused: connect to resume it first");
    }
    ArrayNode out = Json.MAPPER.createArrayNode();
    for (int i = 0; i < count; i++) {
      try {
        Sandboxes.Fork f = sandboxes.fork(org, id, false);
        String child = f.sandbox().row().id();
        schedule(org, child, timeout, autoPause(id));
        out.addObject().set("sandbox", sandbox(org, child, template(parent)));
      } catch (ApiException e) {
        out.addObject().putObject("error").put("code", e.status).put("message", e.getMessage());
      }
    }
    json(response, 201, out);
  }

  private void snapshot(
      Organization org, String id, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    JsonNode body = body(request);
    String name =
        body.hasNonNull("name")
            ? body.get("name").asText()
            : "snap-"
                + id.toLowerCase(java.util.Locale.ROOT)
                + "-"
                + Long.toString(System.currentTimeMillis(), 36);
    Sandboxes.Snapshot snap = sandboxes.snapshot(org, id, name);
    json(response, 201, snapshotInfo(snap.row().name()));
  }

  private void snapshots(Organization org, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    String source = request.getParameter("sandboxID");
    String name = request.getParameter("name");
    ArrayNode out = Json.MAPPER.createArrayNode();
    for (Sandboxes.Snapshot s : sandboxes.snapshots(org)) {
      if ((source == null || source.equals(s.row().source()))
          && (name == null || name.equals(s.row().name()))) {
        out.add(snapshotInfo(s.row().name()));
      }
    }
    json(response, 200, out);
  }

  private static ObjectNode snapshotInfo(String name) {
    ObjectNode o = Json.object();
    o.put("snapshotID", name);
    o.putArray("names").add(name);
    return o;
  }

  private void create(Organization org, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    JsonNode body = body(request);
    String template = body.path("templateID").asText("");
    if (template.isEmpty()) {
      throw ApiException.invalid("templateID", "templateID is required (e.g. \"base\")");
    }
    if (body.path("autoResume").path("enabled").asBoolean(false)) {
      throw ApiException.invalid(
          "autoResume", "autoResume is not supported: resume a paused sandbox with connect");
    }
    if (body.hasNonNull("volumeMounts") && !body.get("volumeMounts").isEmpty()) {
      throw ApiException.invalid("volumeMounts", "volumes are not supported by this server");
    }
    if (body.hasNonNull("mcp")) {
      throw ApiException.invalid("mcp", "the MCP gateway template is not supported by this server");
    }
    long timeout = seconds(body.path("timeout"), "timeout", DEFAULT_TIMEOUT_SECONDS);
    boolean autoPause = body.path("autoPause").asBoolean(false);
    Map<String, String> labels = new LinkedHashMap<>(stringMap(body.path("metadata"), "metadata"));
    labels.put(TEMPLATE_LABEL, template);
    Map<String, String> env = stringMap(body.path("envVars"), "envVars");
    // a template is the default image (base), one of the organization's snapshots (what
    // createSnapshot made), or a published image
    String image = null;
    String snapshot = null;
    if (!template.equals(BASE_TEMPLATE)) {
      if (isOwnSnapshot(org, template)) {
        snapshot = template;
      } else {
        image = template;
      }
    }
    Sandboxes.View view =
        sandboxes.create(
            org,
            new Sandboxes.CreateSpec(
                image, snapshot, null, null, null, env, null, labels, null, null, null, null, null,
                null, null));
    String id = view.row().id();
    homeLink(org, id);
    schedule(org, id, timeout, autoPause);
    json(response, 201, sandbox(org, id, template));
  }

  private boolean isOwnSnapshot(Organization org, String name) {
    if (!Sandboxes.SNAPSHOT_NAME.matcher(name).matches()) {
      return false;
    }
    try {
      return sandboxes.snapshots(org).stream().anyMatch(s -> s.row().name().equals(name));
    } catch (ApiException e) {
      return false; // a provider without snapshots: the name can only be an image
    }
  }

  /**
   * E2B programs use {@code /home/user}: it becomes a link to the sandbox user's home, so paths and
   * a {@code cd} there land in the sandbox's working directory. Best effort: an image without sudo
   * keeps only {@code /home/sandbox}.
   */
  private void homeLink(Organization org, String id) {
    try {
      sandboxes
          .workspace(org, id)
          .run(
              Command.argv(
                  "/bin/sh",
                  "-c",
                  "[ -e /home/user ] || sudo -n ln -s \"$HOME\" /home/user 2>/dev/null; exit 0"),
              RunOptions.withTimeout(Duration.ofSeconds(30)));
    } catch (RuntimeException e) {
      // the sandbox works without the link; paths under /home/user then do not exist
    }
  }

  private void connect(
      Organization org, String id, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    Sandboxes.View v = sandboxes.get(org, id);
    if (v.info() == null) {
      throw ApiException.notFound("sandbox '" + id + "' is gone");
    }
    JsonNode body = body(request);
    int status = 200;
    if (paused.contains(id) || !"running".equals(v.info().state())) {
      if (!"running".equals(v.info().state())) {
        sandboxes.lifecycle(org, id, "resume");
      }
      paused.remove(id);
      status = 201;
    }
    if (body.hasNonNull("timeout")) {
      schedule(org, id, seconds(body.get("timeout"), "timeout", null), autoPause(id));
    } else if (!deadlines.containsKey(id)) {
      schedule(org, id, DEFAULT_TIMEOUT_SECONDS, false);
    }
    json(response, status, sandbox(org, id, template(v)));
  }

  private void pause(Organization org, String id, HttpServletResponse response) throws IOException {
    Sandboxes.View v = sandboxes.get(org, id);
    if (paused.contains(id) || (v.info() != null && !"running".equals(v.info().state()))) {
      throw new E2bError(409, "sandbox '" + id + "' is already paused");
    }
    sandboxes.lifecycle(org, id, "suspend");
    paused.add(id);
    cancelDeadline(id); // a paused E2B sandbox does not time out; connect starts a new timeout
    response.setStatus(204);
  }

  void kill(Organization org, String id) {
    sandboxes.delete(org, id);
    cancelDeadline(id);
    paused.remove(id);
    processes.forget(id);
  }

  private void list(Organization org, HttpServletRequest request, HttpServletResponse response)
      throws IOException {
    Map<String, String> filter = new LinkedHashMap<>();
    String metadata = request.getParameter("metadata");
    if (metadata != null && !metadata.isEmpty()) {
      // the SDK sends the pairs as one query value, each key and value percent-encoded
      for (String pair : metadata.split("&")) {
        int eq = pair.indexOf('=');
        if (eq <= 0) {
          throw ApiException.invalid("metadata", "metadata filter must be key=value pairs");
        }
        filter.put(decode(pair.substring(0, eq)), decode(pair.substring(eq + 1)));
      }
    }
    Set<String> states = new HashSet<>();
    String[] stateParams = request.getParameterValues("state");
    if (stateParams != null) {
      for (String s : stateParams) {
        for (String one : s.split(",")) {
          if (!one.equals("running") && !one.equals("paused")) {
            throw ApiException.invalid(
                "state", "state must be running or paused, was '" + Sandboxes.printable(one) + "'");
          }
          states.add(one);
        }
      }
    }
    if (states.isEmpty()) {
      states = Set.of("running", "paused");
    }
    int limit = 100;
    String limitText = request.getParameter("limit");
    if (limitText != null) {
      try {
        limit = Integer.parseInt(limitText);
      } catch (NumberFormatException e) {
        limit = -1;
      }
      if (limit < 1 || limit > 100) {
        throw ApiException.invalid("limit", "limit must be from 1 to 100");
      }
    }
    String after = null;
    String token = request.getParameter("nextToken");
    if (token != null && !token.isEmpty()) {
      try {
        after = new String(Base64.getUrlDecoder().decode(token), StandardCharsets.UTF_8);
      } catch (IllegalArgumentException e) {
        after = "";
      }
      if (!Sandboxes.ID.matcher(after).matches()) {
        throw ApiException.invalid("nextToken", "nextToken is not one this server gave out");
      }
    }
    ArrayNode out = Json.MAPPER.createArrayNode();
    String last = null;
    boolean more = false;
    String cursor = after;
    // pages of the organization's sandboxes, filtered by E2B state here (paused spans two engine
    // states and an E2B-paused flag)
    outer:
    while (true) {
      Sandboxes.Page page = sandboxes.list(org, filter, null, 100, cursor);
      for (Sandboxes.View v : page.items()) {
        if (!states.contains(state(v))) {
          continue;
        }
        if (out.size() == limit) {
          more = true;
          break outer;
        }
        out.add(listed(org, v));
        last = v.row().id();
      }
      if (!page.more()) {
        break;
      }
      cursor = page.lastId();
    }
    if (more && last != null) {
      response.setHeader(
          "x-next-token",
          Base64.getUrlEncoder()
              .withoutPadding()
              .encodeToString(last.getBytes(StandardCharsets.UTF_8)));
    }
    json(response, 200, out);
  }

  // ---- timeouts ------------------------------------------------------------------------------

  private void schedule(Organization org, String id, long seconds, boolean autoPause) {
    cancelDeadline(id);
    ScheduledFuture<?> task = timers.schedule(() -> expire(org, id), seconds, TimeUnit.SECONDS);
    deadlines.put(id, new Deadline(Instant.now().plusSeconds(seconds), autoPause, task));
  }

  private void cancelDeadline(String id) {
    Deadline d = deadlines.remove(id);
    if (d != null) {
      d.task().cancel(false);
    }
  }

  private boolean autoPause(String id) {
    Deadline d = deadlines.get(id);
    return d != null && d.autoPause();
  }

  /** The end of an E2B sandbox's timeout: killed, or paused when it was created with autoPause. */
  private void expire(Organization org, String id) {
    Deadline d = deadlines.remove(id);
    try {
      if (d != null && d.autoPause()) {
        sandboxes.lifecycle(org, id, "suspend");
        paused.add(id);
      } else {
        kill(org, id);
      }
    } catch (RuntimeException e) {
      // already gone (killed meanwhile): nothing left to end
    }
  }

  // ---- bodies --------------------------------------------------------------------------------

  private ObjectNode sandbox(Organization org, String id, String template) {
    ObjectNode o = Json.object();
    o.put("templateID", template);
    o.put("sandboxID", id);
    o.put("clientID", "sandbox4j");
    o.put("envdVersion", ENVD_VERSION);
    o.put("envdAccessToken", tokens.token(org.id(), id));
    putDomain(o, sandboxes.info(id).orElse(null));
    return o;
  }

  /**
   * The sandbox's domain, from which the SDK's {@code getHost(port)} makes {@code
   * <port>-<id>.<domain>}: the engine's port URL ({@code http://{port}-<id>.localhost:7780}, the
   * local engine's port proxy) is exactly that shape, so its host after {@code {port}-<id>.} is the
   * domain. Null where the provider serves no ports.
   */
  static void putDomain(ObjectNode o, SandboxInfo info) {
    String url = info == null ? null : info.portUrl();
    String prefix = info == null ? null : "{port}-" + info.ref().id() + ".";
    int at = url == null ? -1 : url.indexOf(prefix);
    if (at < 0) {
      o.putNull("domain");
      return;
    }
    String rest = url.substring(at + prefix.length());
    int slash = rest.indexOf('/');
    o.put("domain", slash < 0 ? rest : rest.substring(0, slash));
  }

  private ObjectNode listed(Organization org, Sandboxes.View v) {
    ObjectNode o = Json.object();
    String id = v.row().id();
    o.put("templateID", template(v));
    o.put("sandboxID", id);
    o.put("clientID", "sandbox4j");
    o.put("startedAt", v.row().created());
    Deadline d = deadlines.get(id);
    // no timeout (paused, or after a restart): the end is unknown, shown as far away
    o.put(
        "endAt", d == null ? Instant.parse("9999-12-31T23:59:59Z").toString() : d.end().toString());
    SandboxInfo info = v.info();
    o.put("cpuCount", info == null ? 0 : info.cpus());
    o.put("memoryMB", info == null ? 0 : info.memoryBytes() / (1024 * 1024));
    o.put(
        "diskSizeMB", info == null || info.diskBytes() <= 0 ? 0 : info.diskBytes() / (1024 * 1024));
    o.put("envdVersion", ENVD_VERSION);
    ObjectNode meta = o.putObject("metadata");
    Sandboxes.labels(v.row())
        .forEach(
            (k, val) -> {
              if (!k.equals(TEMPLATE_LABEL)) {
                meta.put(k, val);
              }
            });
    o.put("state", state(v));
    return o;
  }

  private ObjectNode detail(Organization org, Sandboxes.View v) {
    if (v.info() == null) {
      throw ApiException.notFound("sandbox '" + v.row().id() + "' is gone");
    }
    ObjectNode o = listed(org, v);
    o.put("envdAccessToken", tokens.token(org.id(), v.row().id()));
    putDomain(o, v.info());
    return o;
  }

  private String state(Sandboxes.View v) {
    return paused.contains(v.row().id())
            || (v.info() != null && !"running".equals(v.info().state()))
        ? "paused"
        : "running";
  }

  private static String template(Sandboxes.View v) {
    return Sandboxes.labels(v.row()).getOrDefault(TEMPLATE_LABEL, BASE_TEMPLATE);
  }

  private static Map<String, String> stringMap(JsonNode node, String field) {
    Map<String, String> out = new LinkedHashMap<>();
    if (node == null || node.isMissingNode() || node.isNull()) {
      return out;
    }
    if (!node.isObject()) {
      throw ApiException.invalid(field, field + " must be an object of strings");
    }
    node.properties()
        .forEach(
            e -> {
              if (!e.getValue().isTextual()) {
                throw ApiException.invalid(
                    field, field + "." + Sandboxes.printable(e.getKey()) + " must be a string");
              }
              out.put(e.getKey(), e.getValue().asText());
            });
    return out;
  }

  private static long seconds(JsonNode node, String field, Long fallback) {
    if (node == null || node.isMissingNode() || node.isNull()) {
      if (fallback == null) {
        throw ApiException.invalid(field, field + " (seconds) is required");
      }
      return fallback;
    }
    if (!node.canConvertToLong()
        || !node.isIntegralNumber()
        || node.asLong() < 0
        || node.asLong() > MAX_TIMEOUT_SECONDS) {
      throw ApiException.invalid(
          field,
          field + " must be whole seconds from 0 to " + MAX_TIMEOUT_SECONDS + ", was " + node);
    }
    return node.asLong();
  }

  private static JsonNode body(HttpServletRequest request) throws IOException {
    // the SDK's bodies may come chunked, without Content-Length: read to the end
    byte[] bytes = request.getInputStream().readNBytes((1 << 20) + 1);
    if (bytes.length > 1 << 20) {
      throw new ApiException(ErrorCode.TOO_LARGE, "the JSON body is over 1 MiB", null, null, null);
    }
    if (bytes.length == 0) {
      return Json.object();
    }
    try {
      JsonNode node = Json.MAPPER.readTree(bytes);
      if (node == null || !node.isObject()) {
        throw ApiException.invalid(null, "the body must be a JSON object");
      }
      return node;
    } catch (com.fasterxml.jackson.core.JacksonException e) {
      throw ApiException.invalid(null, "the body is not JSON: " + e.getOriginalMessage());
    }
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }

  static void json(HttpServletResponse response, int status, JsonNode body) throws IOException {
    byte[] bytes = Json.MAPPER.writeValueAsBytes(body);
    response.setStatus(status);
    response.setContentType("application/json");
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  private static void requireMethod(String method, String wanted) {
    if (!method.equals(wanted)) {
      throw methodNotAllowed(method);
    }
  }

  private static E2bError methodNotAllowed(String method) {
    return new E2bError(405, method + " is not allowed here");
  }

  private static ApiException notFoundRoute(String route) {
    return ApiException.notFound("no E2B route " + Sandboxes.printable(route));
  }

  /** An error with an E2B status that no {@link ErrorCode} has (409 already paused, 405). */
  static final class E2bError extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int status;

    E2bError(int status, String message) {
      super(message);
      this.status = status;
    }
  }
}
