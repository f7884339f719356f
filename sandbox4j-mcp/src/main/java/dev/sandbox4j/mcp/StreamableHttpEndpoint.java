package dev.sandbox4j.mcp;

import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.Tool;
import io.modelcontextprotocol.common.McpTransportContext;
import io.modelcontextprotocol.json.jackson2.JacksonMcpJsonMapper;
import io.modelcontextprotocol.server.McpServer;
import io.modelcontextprotocol.server.McpSyncServer;
import io.modelcontextprotocol.server.McpSyncServerExchange;
import io.modelcontextprotocol.server.transport.HttpServletStreamableServerTransportProvider;
import io.modelcontextprotocol.spec.McpSchema;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.ServletConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The servlet {@link McpToolServer#streamableHttp} returns: the SDK's streamable-HTTP transport,
 * plus the end of each session's workspace when the client deletes the session, when the session is
 * left idle until the transport forgets it, or when the servlet is destroyed.
 *
 * <p>Requests naming a session that has ended are answered 404, as the MCP specification asks of a
 * terminated session, so that the client starts a new one instead of reaching a workspace that is
 * closed.
 */
final class StreamableHttpEndpoint extends HttpServlet {

  private static final System.Logger LOG = System.getLogger(StreamableHttpEndpoint.class.getName());
  private static final String SESSION_HEADER = "Mcp-Session-Id";

  /** The transport-context key under which the request being served is kept for the tools. */
  private static final String HTTP_REQUEST = "sandbox4j.httpRequest";

  private final transient HttpServletStreamableServerTransportProvider transport;
  private final transient McpSyncServer server;
  private final transient HttpSessions sessions;
  private final transient ScheduledExecutorService sweeper;
  private final transient List<Scheduler> transportSchedulers;

  /**
   * How often the SDK's transport and this endpoint sweep idle sessions: the transport's default,
   * so that both forget a session left idle (no request, no open stream) after 30 to 60 minutes.
   */
  static final Duration SWEEP_INTERVAL = Duration.ofMinutes(30);

  /** See {@link McpToolServer#streamableHttp}. Declared as a servlet: see there why. */
  static HttpServlet create(SessionWorkspaces workspaces, List<Tool> tools) {
    return create(workspaces, tools, SWEEP_INTERVAL);
  }

  /**
   * An endpoint that sweeps its idle sessions every {@code sweepInterval} (the transport keeps
   * {@link #SWEEP_INTERVAL}: tests shorten only this endpoint's).
   */
  static HttpServlet create(
      SessionWorkspaces workspaces, List<Tool> tools, Duration sweepInterval) {
    Objects.requireNonNull(workspaces, "workspaces");
    Objects.requireNonNull(tools, "tools");
    JacksonMcpJsonMapper mapper = new JacksonMcpJsonMapper(McpToolServer.JSON);
    // refused until the transport has swept twice: by then it has forgotten the session too
    HttpSessions sessions = new HttpSessions(workspaces, SWEEP_INTERVAL.multipliedBy(2));
    // The transport's session sweeper runs on a Reactor single scheduler of its own, with a
    // non-daemon thread that its close never disposes (mcp-core 2.1.0): a JVM that served MCP
    // could not exit. Catch that scheduler as the transport makes it, so destroy() disposes it.
    List<Scheduler> transportSchedulers = new CopyOnWriteArrayList<>();
    Schedulers.Snapshot reactorDefaults =
        Schedulers.setFactoryWithSnapshot(
            new Schedulers.Factory() {
              @Override
              public Scheduler newSingle(ThreadFactory threads) {
                Scheduler single =
                    Schedulers.Factory.super.newSingle(
                        task -> {
                          Thread t = threads.newThread(task);
                          t.setDaemon(true);
                          return t;
                        });
                transportSchedulers.add(single);
                return single;
              }
            });
    HttpServletStreamableServerTransportProvider transport;
    try {
      transport =
          HttpServletStreamableServerTransportProvider.builder()
              .jsonMapper(mapper)
              // the container decides the path: an empty endpoint suffix matches wherever mounted
              .mcpEndpoint("")
              .contextExtractor(
                  request -> McpTransportContext.create(Map.of(HTTP_REQUEST, request)))
              .sessionSweepInterval(SWEEP_INTERVAL)
              .build();
    } finally {
      Schedulers.resetFrom(reactorDefaults);
    }
    Function<McpSyncServerExchange, RunContext> runs =
        exchange ->
            new McpToolServer.StandaloneRun(
                sessions.workspace(
                    exchange.sessionId(),
                    (HttpServletRequest) exchange.transportContext().get(HTTP_REQUEST)));
    McpSyncServer server =
        McpServer.sync(transport)
            .serverInfo("sandbox4j", McpToolServer.version())
            .jsonMapper(mapper)
            .capabilities(McpSchema.ServerCapabilities.builder().tools(false).build())
            .tools(tools.stream().map(tool -> McpToolServer.specification(tool, runs)).toList())
            .build();
    ScheduledExecutorService sweeper =
        Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("sandbox4j-mcp-session-sweeper").daemon().factory());
    long millis = sweepInterval.toMillis();
    sweeper.scheduleWithFixedDelay(
        () -> {
          try {
            sessions.sweep();
          } catch (RuntimeException e) {
            // the caller's close failed: its workspace stays as it is; the sweeps go on
            LOG.log(System.Logger.Level.WARNING, "closing an idle MCP session's workspace", e);
          }
        },
        millis,
        millis,
        TimeUnit.MILLISECONDS);
    return new StreamableHttpEndpoint(
        transport, server, sessions, sweeper, List.copyOf(transportSchedulers));
  }

  private StreamableHttpEndpoint(
      HttpServletStreamableServerTransportProvider transport,
      McpSyncServer server,
      HttpSessions sessions,
      ScheduledExecutorService sweeper,
      List<Scheduler> transportSchedulers) {
    this.transport = transport;
    this.server = server;
    this.sessions = sessions;
    this.sweeper = sweeper;
    this.transportSchedulers = transportSchedulers;
  }

  @Override
  public void init(ServletConfig config) throws ServletException {
    super.init(config);
    transport.init(config);
  }

  @Override
  protected void service(HttpServletRequest request, HttpServletResponse response)
      throws ServletException, IOException {
    String id = request.getHeader(SESSION_HEADER);
    if (id == null) {
      transport.service(request, response); // an initialize, or refused by the transport
      String created = response.getHeader(SESSION_HEADER);
      if (created != null) {
        sessions.initialized(created, request);
      }
      return;
    }
    if (sessions.hasEnded(id) || !sessions.mayUse(id, request)) {
      // another principal's session is as unknown as an ended one: 404 either way
      response.sendError(HttpServletResponse.SC_NOT_FOUND, "no such MCP session");
      return;
    }
    if ("DELETE".equals(request.getMethod())) {
      // before the transport answers: a client that sees the answer sees the workspace closed
      sessions.end(id);
      transport.service(request, response);
      return;
    }
    HttpSessions.InFlight inFlight = sessions.begin(id);
    request.setAttribute(HttpSessions.InFlight.ATTRIBUTE, inFlight);
    boolean handedOver = false;
    try {
      transport.service(request, response);
      if (request.isAsyncStarted()) {
        if (response.getStatus() == HttpServletResponse.SC_OK) {
          // an event stream the transport accepted, maybe for a session not yet in use
          sessions.accepted(id, request, inFlight);
        }
        handedOver = inFlight.counted() && doneWhenComplete(request, inFlight);
      }
    } finally {
      if (!handedOver) {
        inFlight.done();
      }
    }
  }

  /** Counts the request done when its event stream ends; false if it has ended. */
  private static boolean doneWhenComplete(
      HttpServletRequest request, HttpSessions.InFlight inFlight) {
    try {
      request
          .getAsyncContext()
          .addListener(
              new AsyncListener() {
                @Override
                public void onComplete(AsyncEvent event) {
                  inFlight.done();
                }

                @Override
                public void onTimeout(AsyncEvent event) {}

                @Override
                public void onError(AsyncEvent event) {}

                @Override
                public void onStartAsync(AsyncEvent event) {}
              });
      return true;
    } catch (IllegalStateException completed) {
      return false;
    }
  }

  /** Stops serving, then ends every session (each workspace's {@code close}, once). */
  @Override
  public void destroy() {
    sweeper.shutdownNow();
    try {
      server.closeGracefully();
    } finally {
      transportSchedulers.forEach(Scheduler::dispose);
      sessions.endAll();
    }
  }
}
