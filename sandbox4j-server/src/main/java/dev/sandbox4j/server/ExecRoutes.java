package dev.sandbox4j.server;

import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import jakarta.servlet.ServletContext;
import java.io.IOException;
import java.io.OutputStream;
import java.time.Duration;
import java.util.Set;
import java.util.function.Supplier;
import org.eclipse.jetty.ee10.websocket.server.JettyWebSocketServerContainer;

/**
 * The routes that run one command and stream its events: {@code POST .../exec} as NDJSON, and
 * {@code GET .../exec} upgraded to a WebSocket (whose key is checked again for every command).
 */
final class ExecRoutes {

  /** Finds the organization of an API key's hash, or throws {@code unauthenticated}. */
  @FunctionalInterface
  interface Keys {
    Organization organizationOfKey(String hash);
  }

  private final Sandboxes sandboxes;
  private final Metrics metrics;
  private final RequestLog log;
  private final ActiveExecs active;
  private final Duration keepAlive;
  private final WebSocketEndpoints.ExecSocketIdle execSocketIdle;
  private final Keys keys;
  private final Supplier<ServletContext> context;

  ExecRoutes(
      Sandboxes sandboxes,
      Metrics metrics,
      RequestLog log,
      ActiveExecs active,
      Duration keepAlive,
      WebSocketEndpoints.ExecSocketIdle execSocketIdle,
      Keys keys,
      Supplier<ServletContext> context) {
    this.sandboxes = sandboxes;
    this.metrics = metrics;
    this.log = log;
    this.active = active;
    this.keepAlive = keepAlive;
    this.execSocketIdle = execSocketIdle;
    this.keys = keys;
    this.context = context;
  }

  void exec(Call c) throws IOException {
    ExecRequest request = c.body(ExecRequest.class, null);
    var command = request.command();
    RunOptions.Builder options = request.options();
    request.keepsStdinOpen(false);
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

  void execSocket(Call c) throws IOException {
    c.onlyQuery(Set.of("keepOpen"));
    String keepOpenText = c.singleQuery("keepOpen");
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
    // the key's hash: the key itself is not kept for the socket's life
    String keyHash = ApiServlet.keyHash(c.request);
    WebSocketEndpoints.ExecSocket.Access access =
        new WebSocketEndpoints.ExecSocket.Access() {
          @Override
          public Workspace recheck() {
            Organization now = keys.organizationOfKey(keyHash);
            if (now.id() != organization.id()) {
              throw new ApiException(
                  ErrorCode.UNAUTHENTICATED, "unknown or revoked API key", null, null, null);
            }
            return sandboxes.workspace(now, id);
          }

          @Override
          public void log(int status, long millis) {
            metrics.request("WS", ApiServlet.EXEC_COMMAND_ROUTE, status);
            log.request(
                "WS", ApiServlet.EXEC_COMMAND_ROUTE, organization.name(), id, status, millis);
          }
        };
    JettyWebSocketServerContainer container =
        JettyWebSocketServerContainer.getContainer(context.get());
    if (!container.upgrade(
        (req, resp) ->
            new WebSocketEndpoints.ExecSocket(
                ws, keepOpen, execSocketIdle, access, metrics, active, sandboxes.telemetry()),
        c.request,
        c.response)) {
      throw ApiException.invalid(null, "the WebSocket upgrade failed");
    }
  }
}
