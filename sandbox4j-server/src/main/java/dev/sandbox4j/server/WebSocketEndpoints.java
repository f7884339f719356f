package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.eclipse.jetty.util.thread.Scheduler;
import org.eclipse.jetty.websocket.api.Callback;
import org.eclipse.jetty.websocket.api.Session;
import org.eclipse.jetty.websocket.api.StatusCode;

/**
 * Holds the WebSocket endpoints. Jetty invokes an endpoint's methods through a public method-handle
 * lookup, so the endpoint class must be public; nested in this package-private class it stays out
 * of the module's API.
 */
final class WebSocketEndpoints {

  private WebSocketEndpoints() {}

  /** When and on what a kept-open exec socket that waits for its next command is closed. */
  record ExecSocketIdle(Scheduler scheduler, Duration after) {}

  /**
   * Execs over a WebSocket (docs/server-api.md): a text frame with an ExecRequest starts a command,
   * then {@code stdin}, {@code stdin_eof} and {@code cancel} frames feed or end it; the server
   * sends exec events. A plain socket closes after the command's last event. A kept-open one
   * ({@code ?keepOpen=true}) sends {@code started} before it runs each command and, after the last
   * event, waits for the next request, so a client saves the connection, upgrade and key check per
   * command; a command that ends without a last event (cancelled) still closes it, and so does a
   * minute without a request. Cancel or a closed socket kills the running command's tree.
   *
   * <p>State: WAITING (for a request) → RUNNING (a virtual thread runs the command) → WAITING again
   * if kept open and the last event went out, else CLOSED. Jetty calls the {@code onWebSocket*}
   * methods one at a time; sends are serialized on this endpoint's monitor and wait for completion,
   * so a slow client holds the command's output back instead of filling memory. The state fields
   * change under {@code state}, never held while waiting for a send: the runner's end, the idle
   * close and the next request race on a kept-open socket.
   */
  public static final class ExecSocket implements Session.Listener.AutoDemanding {

    /** What a socket needs from the API around its commands. */
    interface Access {
      /**
       * The sandbox's workspace for one more command on a kept-open socket: re-checks that the key
       * is still valid and the sandbox still the organization's, as a new request would.
       */
      Workspace recheck();

      /** Writes the request log's line for one command that ended. */
      void log(int status, long millis);
    }

    private static final String STARTED = "{\"type\":\"started\"}";

    private final Workspace workspace;
    private final boolean keepOpen;
    private final ExecSocketIdle idle;
    private final Access access;
    private final Metrics metrics;
    private final ActiveExecs active;
    private final dev.sandbox4j.workspace.SandboxTelemetry telemetry;
    // the upgrade request's span: the parent of a command whose request carries no trace context
    private final io.opentelemetry.context.Context upgradeContext;
    private volatile Session session;
    private final Object state = new Object(); // never held while sending
    private ExecRun run; // guarded by state; null before the first request and while WAITING
    private StdinPipe stdin; // guarded by state; null when the request said "stdin": false
    private int requests; // guarded by state: how many this socket carried
    private boolean closing; // guarded by state: closed for idleness, takes no more requests
    private Scheduler.Task idleClose; // guarded by state: set while WAITING after a command

    ExecSocket(
        Workspace workspace,
        boolean keepOpen,
        ExecSocketIdle idle,
        Access access,
        Metrics metrics,
        ActiveExecs active,
        dev.sandbox4j.workspace.SandboxTelemetry telemetry) {
      this.telemetry = telemetry;
      this.upgradeContext = io.opentelemetry.context.Context.current();
      this.workspace = workspace;
      this.keepOpen = keepOpen;
      this.idle = idle;
      this.access = access;
      this.metrics = metrics;
      this.active = active;
    }

    @Override
    public void onWebSocketOpen(Session session) {
      this.session = session;
    }

    @Override
    public void onWebSocketText(String text) {
      try {
        ExecRun current;
        StdinPipe input;
        int carried;
        synchronized (state) {
          current = run;
          input = stdin;
          carried = requests;
        }
        boolean waiting = carried == 0 || keepOpen && (current == null || current.reported());
        if (waiting) {
          if (carried > 0 && moot(Json.MAPPER.readTree(text))) {
            return;
          }
          start(Json.parse(text.getBytes(StandardCharsets.UTF_8), ExecRequest.class), carried);
          return;
        }
        JsonNode frame = Json.MAPPER.readTree(text);
        String type = frame == null || !frame.isObject() ? null : frame.path("type").asText(null);
        switch (type == null ? "" : type) {
          case "stdin" -> {
            if (input == null) {
              throw ApiException.invalid("type", "stdin frames after \"stdin\": false");
            }
            JsonNode data = frame.get("data");
            if (data == null || !data.isTextual()) {
              throw ApiException.invalid("data", "a stdin frame carries base64 data");
            }
            byte[] bytes;
            try {
              bytes = Base64.getDecoder().decode(data.textValue());
            } catch (IllegalArgumentException e) {
              throw ApiException.invalid("data", "stdin data is not valid base64");
            }
            input.feed(bytes);
          }
          case "stdin_eof" -> {
            if (input != null) {
              input.finish();
            }
          }
          case "cancel" -> {
            // The runner's end closes the socket, once the command's tree is killed: a client
            // that waits for the close knows its processes are gone when it reports the cancel.
            current.cancel();
          }
          default -> throw badType(type);
        }
      } catch (ApiException e) {
        failAndClose(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (com.fasterxml.jackson.core.exc.StreamReadException e) {
        failAndClose(Json.malformed(e));
      } catch (java.io.IOException e) {
        failAndClose(ApiException.invalid(null, "malformed JSON frame: " + e.getMessage()));
      } catch (RuntimeException e) {
        failAndClose(ApiServlet.map(e)); // e.g. the key check could not read the database
      }
    }

    /**
     * Whether {@code node}, arriving on a kept-open socket between commands, is a frame for the
     * command before (stdin or cancel that crossed its last event): moot now, so ignored. Any other
     * frame type is an error; an object without a type is the next request.
     */
    private static boolean moot(JsonNode node) {
      if (node == null || !node.isObject() || !node.has("type")) {
        return false;
      }
      String type = node.path("type").asText("");
      if (!type.equals("stdin") && !type.equals("stdin_eof") && !type.equals("cancel")) {
        throw badType(type);
      }
      return true;
    }

    /** Reads a request's {@code trace} object for a propagator. */
    private static final io.opentelemetry.context.propagation.TextMapGetter<Map<String, String>>
        TRACE_FIELDS =
            new io.opentelemetry.context.propagation.TextMapGetter<>() {
              @Override
              public Iterable<String> keys(Map<String, String> carrier) {
                return carrier.keySet();
              }

              @Override
              public String get(Map<String, String> carrier, String key) {
                return carrier == null ? null : carrier.get(key);
              }
            };

    private static ApiException badType(String type) {
      return ApiException.invalid(
          "type", "a frame's type is stdin, stdin_eof or cancel, was " + type);
    }

    private void start(ExecRequest request, int carried) {
      // the upgrade checked the key and the sandbox for the first command; later ones on a
      // kept-open socket check again, so a revoked key or a deleted sandbox stops them too
      Workspace target = carried == 0 ? workspace : access.recheck();
      Map<String, String> traceContext = request.traceContext();
      io.opentelemetry.context.Context parent =
          traceContext.isEmpty()
              ? upgradeContext
              : telemetry
                  .openTelemetry()
                  .getPropagators()
                  .getTextMapPropagator()
                  .extract(io.opentelemetry.context.Context.root(), traceContext, TRACE_FIELDS);
      Command command = request.command();
      RunOptions.Builder options = request.options();
      request.keepsStdinOpen(false);
      StdinPipe input = request.streamsStdin() ? new StdinPipe() : null;
      if (input != null) {
        options.stdin(input);
      }
      ExecRun created = new ExecRun(target, command, options, this::send, metrics);
      synchronized (state) {
        if (closing) {
          return; // the idle close won: the client sees the socket close without "started"
        }
        if (idleClose != null) {
          idleClose.cancel();
          idleClose = null;
        }
        run = created;
        stdin = input;
        requests++;
        if (keepOpen) {
          // Queued before any close can be (this lock orders it before the idle close), and
          // not waited for: frames go out in order, so the client reads it before anything else
          // of this command. A client whose socket closed in order without it knows that
          // nothing ran.
          synchronized (this) {
            session.sendText(STARTED, Callback.NOOP);
          }
        }
      }
      Thread.ofVirtual()
          .name("sandbox4j-exec-ws")
          .start(
              () -> {
                active.add(created);
                long began = System.nanoTime();
                int status = ExecRun.CANCELLED;
                io.opentelemetry.api.trace.Span span =
                    telemetry
                        .tracer()
                        .spanBuilder("WS /v1/sandboxes/{id}/exec")
                        .setParent(parent)
                        .setSpanKind(io.opentelemetry.api.trace.SpanKind.SERVER)
                        .startSpan();
                try (io.opentelemetry.context.Scope ignored = span.makeCurrent()) {
                  status = created.run();
                } finally {
                  span.setAttribute(ApiServlet.HTTP_ROUTE, ApiServlet.EXEC_COMMAND_ROUTE);
                  span.setAttribute(ApiServlet.HTTP_STATUS, status);
                  span.end();
                  active.remove(created);
                  if (input != null) {
                    input.close();
                  }
                  access.log(status, (System.nanoTime() - began) / 1_000_000);
                  if (keepOpen && status != ExecRun.CANCELLED) { // the last event went out
                    waitForNext(created);
                  } else if (!closing()) {
                    close(StatusCode.NORMAL, "done");
                  }
                }
              });
    }

    /** Back to WAITING on a kept-open socket, unless the next request already started. */
    private void waitForNext(ExecRun ended) {
      synchronized (state) {
        if (run != ended) {
          return; // the next request came in right after the last event and runs now
        }
        run = null;
        stdin = null;
        if (closing) {
          return; // the client closed it meanwhile: nothing to wait for
        }
        idleClose =
            idle.scheduler()
                .schedule(this::closeIfIdle, idle.after().toMillis(), TimeUnit.MILLISECONDS);
      }
    }

    /** Whether the socket is closing already: a refused frame's 1008, or the client's close. */
    private boolean closing() {
      synchronized (state) {
        return closing;
      }
    }

    /** Closes the socket if it still waits for a request, so that none can start on it. */
    private void closeIfIdle() {
      synchronized (state) {
        if (run != null || closing) {
          return;
        }
        closing = true;
        idleClose = null;
      }
      close(StatusCode.NORMAL, "idle");
    }

    /** Sends one event and waits until it is written; serialized with every other send. */
    private void send(ObjectNode event) throws java.io.IOException {
      synchronized (this) { // the send monitor
        Callback.Completable sent = new Callback.Completable();
        session.sendText(Json.MAPPER.writeValueAsString(event), sent);
        try {
          sent.get();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new java.io.InterruptedIOException("send interrupted");
        } catch (java.util.concurrent.ExecutionException e) {
          throw new java.io.IOException("the client is gone", e.getCause());
        }
      }
    }

    private void failAndClose(ApiException e) {
      metrics.error(e.code);
      ObjectNode error =
          Json.object().put("code", e.code.spelling()).put("message", e.getMessage());
      if (e.field != null) {
        error.put("field", e.field);
      }
      ObjectNode event = Json.object().put("type", "error");
      event.set("error", error);
      ended(); // first, so that the runner's end neither sends its last event nor closes with 1000
      synchronized (this) {
        try {
          session.sendText(Json.MAPPER.writeValueAsString(event), Callback.NOOP);
        } catch (java.io.IOException ignored) {
          // the close below tells the client anyway
        }
      }
      close(StatusCode.POLICY_VIOLATION, e.code.spelling());
    }

    private void close(int status, String reason) {
      Session s = session;
      if (s != null && s.isOpen()) {
        s.close(status, reason, Callback.NOOP);
      }
    }

    @Override
    public void onWebSocketClose(int status, String reason, Callback callback) {
      ended();
      callback.succeed();
    }

    /** Kills the running command, if any, ends its stdin, and takes no more requests. */
    private void ended() {
      ExecRun current;
      StdinPipe input;
      synchronized (state) {
        current = run;
        input = stdin;
        closing = true;
        if (idleClose != null) {
          idleClose.cancel();
          idleClose = null;
        }
      }
      if (current != null) {
        current.cancel();
      }
      if (input != null) {
        input.close();
      }
    }

    @Override
    public void onWebSocketError(Throwable cause) {
      ended();
    }
  }
}
