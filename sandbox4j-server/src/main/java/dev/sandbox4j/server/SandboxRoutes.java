package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The routes of an organization's sandboxes as a whole: create, list (its query and cursor), get,
 * delete, the lifecycle operations and fork, and the {@code Sandbox} object they answer with.
 */
final class SandboxRoutes {

  private static final int DEFAULT_PAGE = 50;
  private static final int MAX_PAGE = 500;

  private final Sandboxes sandboxes;
  private final CommandRoutes commands;

  SandboxRoutes(Sandboxes sandboxes, CommandRoutes commands) {
    this.sandboxes = sandboxes;
    this.commands = commands;
  }

  void create(Call c) throws IOException {
    Sandboxes.CreateSpec spec = c.body(Sandboxes.CreateSpec.class, null);
    c.json(201, sandbox(sandboxes.create(c.organization, spec)));
  }

  void list(Call c) throws IOException {
    c.onlyQuery(Set.of("label", "state", "limit", "cursor"));
    Map<String, String> labels = new LinkedHashMap<>();
    String[] given = c.request.getParameterValues("label");
    if (given != null) {
      if (given.length > CreateSpecs.MAX_LABELS) {
        throw ApiException.invalid(
            "label", "at most " + CreateSpecs.MAX_LABELS + " label filters, was " + given.length);
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
    String state = c.singleQuery("state");
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
    String limitText = c.singleQuery("limit");
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
    String cursor = c.singleQuery("cursor");
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

  void get(Call c) throws IOException {
    Sandboxes.View view = sandboxes.get(c.organization, c.param("id"));
    if (view.info() == null) {
      throw ApiException.unavailable(
          "sandbox '" + c.param("id") + "' is gone (destroyed, e.g. by one of its timers)");
    }
    c.json(200, sandbox(view));
  }

  void delete(Call c) {
    String id = c.param("id");
    sandboxes.delete(c.organization, id);
    commands.forgetSandbox(id);
    c.noContent();
  }

  void lifecycle(Call c, String operation) throws IOException {
    c.json(200, sandbox(sandboxes.lifecycle(c.organization, c.param("id"), operation)));
  }

  void fork(Call c) throws IOException {
    ApiServlet.ForkRequest request =
        c.body(ApiServlet.ForkRequest.class, new ApiServlet.ForkRequest(false));
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

  private static ObjectNode sandbox(Sandboxes.View v) {
    ObjectNode o = Json.object();
    String id = v.row().id();
    o.put("id", id);
    o.put("ref", "remote:" + id);
    SandboxInfo info = v.info();
    o.put("state", info == null ? "destroyed" : info.state());
    o.put(
        "image", info == null ? null : Sandboxes.shownImage(v.row().organization(), info.image()));
    o.put("isolation", info == null ? null : info.isolation()); // null: docker does not say
    // a provider that does not say when (boxd, modal) leaves it to the server's own record
    o.put(
        "created",
        info == null || info.created() == null ? v.row().created() : info.created().toString());
    ObjectNode labels = o.putObject("labels");
    Sandboxes.labels(v.row()).forEach(labels::put);
    if (info != null) {
      o.put("cpus", info.cpus());
      o.put("memoryBytes", info.memoryBytes());
      o.put("pids", info.pids());
    }
    o.put(
        "workingDirectory",
        v.row().workingDirectory() != null
            ? v.row().workingDirectory()
            // none asked for: the sandbox's own (its image's WorkingDir, for an image with one)
            : info != null && info.workingDirectory() != null
                ? info.workingDirectory()
                : "/home/sandbox");
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
}
