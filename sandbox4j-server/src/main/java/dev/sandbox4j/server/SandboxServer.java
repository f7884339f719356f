package dev.sandbox4j.server;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Servlet;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Executors;
import java.util.function.Consumer;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.ee10.websocket.server.config.JettyWebSocketServletContainerInitializer;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.eclipse.jetty.util.thread.ScheduledExecutorScheduler;
import org.eclipse.jetty.util.thread.Scheduler;

/**
 * The local engine, or another provider ({@link Builder#engine(ServerEngine)}, e.g. Docker), as a
 * multi-tenant HTTP service: the API of docs/server-api.md (also served at {@code
 * /v1/openapi.json}) on Jetty, every request on a virtual thread. A route whose capability the
 * provider lacks (hibernate, egress on docker) answers 501 {@code not_supported}.
 *
 * <pre>{@code
 * Path data = Path.of("/var/lib/sandbox4j/server");
 * String key;
 * try (ServerKeys keys = ServerKeys.open(data)) {
 *   key = keys.create("acme").key();
 * }
 * try (SandboxServer server = SandboxServer.builder().dataDirectory(data).bind("127.0.0.1", 0).build()) {
 *   server.start();
 *   URI uri = server.uri();   // clients send "Authorization: Bearer " + key
 * }
 * }</pre>
 *
 * <p>Its own state (organizations, key hashes, which organization owns which sandbox and snapshot,
 * which images are published to all: {@link ServerImages}) is in SQLite at {@code
 * <dataDirectory>/server.db}; the sandboxes are the engine's, in its home. A new server on the same
 * data directory and engine home sees the same sandboxes, still owned. Stopping the server kills
 * the commands it is streaming (their streams end without an exit event); sandboxes keep running.
 *
 * <p>{@code /mcp} serves the Coder tools over MCP (streamable HTTP) behind the same key check, each
 * MCP session in one sandbox of the key's organization: {@code ?sandbox=ID}, or one created on the
 * session's first tool call (labelled {@code created-by=mcp}, counted in the quota, left running
 * when the session ends). A servlet mounted at {@code /mcp/*} with {@link Builder#servlet} replaces
 * it.
 *
 * <p>{@code /e2b} serves E2B's control plane and envd API (and {@code /files}, E2B's signed file
 * URLs), so that programs written for E2B's SDKs run against the server: docs/e2b.md.
 *
 * <p>An organization starts sandboxes only from its own snapshots and the published images, and no
 * bigger than the ceilings per sandbox ({@link Builder#maxCpusPerSandbox} and the like, derived
 * from the host by default); anything else is refused before the engine is asked.
 *
 * <p>State: NEW → STARTED ({@link #start}) → CLOSED ({@link #close}, idempotent). Thread-safe.
 * Needs what the engine needs (root, Linux) only once a sandbox is used.
 */
public final class SandboxServer implements AutoCloseable {

  private final Server jetty;
  private final ServerConnector connector;
  private final Database db;
  private final ActiveExecs active;
  private final String host;
  private final ApiServlet api;
  private final List<String> mountPaths;
  private boolean closed; // guarded by this
  private final AutoCloseable activeGauge;

  private SandboxServer(Builder b) {
    this.host = b.host;
    this.db = Database.open(b.dataDirectory);
    SandboxCeilings host;
    try {
      db.bindProvider(b.engine.provider().name());
      // the disk ceiling's default: a quarter of the file system that holds the sandboxes, which
      // for a provider other than the local engine is unknown here: the data directory's stands in
      host =
          SandboxCeilings.ofHost(
              b.engine.provider() instanceof LocalSandbox local ? local.home() : b.dataDirectory);
    } catch (RuntimeException e) {
      db.close();
      throw e;
    }
    ServerLimits limits =
        new ServerLimits(
            b.maxSandboxes,
            b.createBurst,
            b.createRefill,
            b.maxJsonBytes,
            new SandboxCeilings(
                b.maxCpus != 0 ? b.maxCpus : host.cpus(),
                b.maxMemory != 0 ? b.maxMemory : host.memoryBytes(),
                b.maxPids != 0 ? b.maxPids : host.pids(),
                b.maxDisk != 0 ? b.maxDisk : host.diskBytes(),
                b.maxDiskInodes != 0 ? b.maxDiskInodes : host.diskInodes()),
            b.isolation,
            new RegistryAllowlist(b.registries));
    Sandboxes sandboxes;
    try {
      sandboxes = new Sandboxes(b.engine, db, limits, b.openTelemetry);
    } catch (RuntimeException e) {
      db.close();
      throw e;
    }
    Metrics metrics = new Metrics(sandboxes::countByState);
    // the same counts as the Prometheus gauge sandbox4j_server_sandboxes, as an OpenTelemetry one
    this.activeGauge =
        sandboxes.telemetry().observeSandboxes(b.engine.provider().name(), sandboxes::countByState);
    RequestLog log = new RequestLog(b.requestLog);
    this.active = new ActiveExecs();
    // Jetty starts and stops it with the server; the API times idle exec sockets with it
    Scheduler scheduler = new ScheduledExecutorScheduler("sandbox4j-server-timers", true);
    this.api =
        new ApiServlet(
            sandboxes,
            db,
            metrics,
            log,
            active,
            limits.maxJsonBytes(),
            b.keepAlive,
            new WebSocketEndpoints.ExecSocketIdle(scheduler, b.execSocketIdle));

    QueuedThreadPool threads = new QueuedThreadPool();
    threads.setName("sandbox4j-server");
    threads.setVirtualThreadsExecutor(Executors.newVirtualThreadPerTaskExecutor());
    this.jetty = new Server(threads, scheduler, null);
    HttpConfiguration http = new HttpConfiguration();
    http.setSendServerVersion(false);
    // a 4096-byte sandbox path, percent-encoded, is up to 12 KiB of request line
    http.setRequestHeaderSize(32 * 1024);
    this.connector = new ServerConnector(jetty, new HttpConnectionFactory(http));
    connector.setHost(b.host);
    connector.setPort(b.port);
    // an exec may be silent for as long as the engine lets it (30 min without output)
    connector.setIdleTimeout(Duration.ofMinutes(31).toMillis());
    jetty.addConnector(connector);

    ServletContextHandler context = new ServletContextHandler();
    context.setContextPath("/");
    JettyWebSocketServletContainerInitializer.configure(
        context,
        (servletContext, container) -> {
          container.setMaxTextMessageSize(limits.maxJsonBytes());
          container.setIdleTimeout(Duration.ofMinutes(31));
        });
    List<Mount> mounts = new ArrayList<>(b.mounts);
    if (mounts.stream().noneMatch(m -> m.pathSpec().equals(McpEndpoint.PATH))) {
      mounts.add(new Mount(McpEndpoint.PATH, new McpEndpoint()));
    }
    this.mountPaths = mounts.stream().map(Mount::pathSpec).toList();
    for (Mount m : mounts) {
      // async: the MCP transport answers with event streams from other threads
      FilterHolder filter =
          new FilterHolder(new TenantFilter(api, sandboxes, metrics, log, m.pathSpec()));
      filter.setAsyncSupported(true);
      context.addFilter(filter, m.pathSpec(), EnumSet.of(DispatcherType.REQUEST));
      ServletHolder servlet = new ServletHolder(m.servlet());
      servlet.setAsyncSupported(true);
      context.addServlet(servlet, m.pathSpec());
    }
    // E2B's control plane and envd (docs/e2b.md): its own key header and per-sandbox tokens, so
    // not behind TenantFilter's Bearer check
    ServletHolder e2b =
        new ServletHolder(
            new E2bServlet(sandboxes, db, metrics, log, E2bTokens.open(b.dataDirectory)));
    e2b.setAsyncSupported(true);
    // Multipart uploads spill parts over 1 MiB to disk before they reach a sandbox: into the data
    // directory (0700), never the host's shared /tmp, and no bigger than a sandbox's disk may be.
    long mostUploaded = limits.ceilings().diskBytes();
    e2b.getRegistration()
        .setMultipartConfig(
            new jakarta.servlet.MultipartConfigElement(
                E2bServlet.uploadsDirectory(b.dataDirectory).toString(),
                mostUploaded,
                mostUploaded,
                1 << 20));
    context.addServlet(e2b, E2bServlet.PATH);
    context.addServlet(e2b, E2bServlet.SIGNED_FILES);
    context.addServlet(new ServletHolder(api), "/");
    context.setErrorHandler(new JsonErrors.Servlets());
    jetty.setErrorHandler(new JsonErrors.Core());
    jetty.setHandler(context);
  }

  /** A builder: the engine from {@code SANDBOX4J_HOME}, loopback, an OS-chosen port. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Starts listening.
   *
   * @throws IllegalStateException if closed, or the address cannot be bound (the message says why)
   */
  public synchronized SandboxServer start() {
    if (closed) {
      throw new IllegalStateException("the server is closed");
    }
    try {
      jetty.start();
    } catch (Exception e) {
      throw new IllegalStateException(
          "cannot start the server on " + host + ": " + e.getMessage(), e);
    }
    return this;
  }

  /** Where it listens, e.g. {@code http://127.0.0.1:41234}; valid after {@link #start}. */
  public URI uri() {
    int port = connector.getLocalPort();
    if (port <= 0) {
      throw new IllegalStateException("the server is not started");
    }
    String h = host.contains(":") ? "[" + host + "]" : host;
    return URI.create("http://" + h + ":" + port);
  }

  /** The method and path template of every route the API serves: what the OpenAPI lists. */
  List<String> routes() {
    return api.routes().stream().map(r -> r.method() + " " + r.template()).toList();
  }

  /**
   * The path specs of the servlets mounted beside the API behind its key check ({@code /mcp/*}).
   */
  List<String> mounts() {
    return mountPaths;
  }

  /**
   * Stops listening: commands being streamed are killed and their streams end without an exit
   * event; background commands started through the server are killed; sandboxes keep running.
   */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    active.cancelAll();
    try {
      jetty.stop();
    } catch (Exception e) {
      // stopping: the sockets are closed either way
    } finally {
      api.killCommands();
      try {
        activeGauge.close();
      } catch (Exception e) {
        // the SDK's close of an instrument throws nothing it documents: nothing to undo
      }
      db.close();
    }
  }

  private record Mount(String pathSpec, Servlet servlet) {}

  /** Options of a {@link SandboxServer}; each setter validates and names what is wrong. */
  public static final class Builder {
    private ServerEngine engine;
    private io.opentelemetry.api.OpenTelemetry openTelemetry; // null: the global one
    private Path dataDirectory;
    private String host = "127.0.0.1";
    private int port;
    private int maxSandboxes = ServerLimits.DEFAULTS.maxSandboxesPerOrganization();
    private int createBurst = ServerLimits.DEFAULTS.createBurst();
    private Duration createRefill = ServerLimits.DEFAULTS.createRefill();
    private long maxJsonBytes = ServerLimits.DEFAULTS.maxJsonBytes();
    private int maxCpus; // 0: from the host
    private long maxMemory; // 0: from the host
    private int maxPids; // 0: from the host
    private long maxDisk; // 0: from the host
    private long maxDiskInodes; // 0: the engine's default
    private IsolationPolicy isolation = IsolationPolicy.DEFAULT;
    private final List<String> registries = new java.util.ArrayList<>();
    private Consumer<String> requestLog = System.err::println;
    private Duration keepAlive = Duration.ofSeconds(15);
    private Duration execSocketIdle = Duration.ofMinutes(1);
    private final List<Mount> mounts = new ArrayList<>();

    private Builder() {}

    /**
     * The engine whose sandboxes the server serves; only its state directory ({@link
     * LocalSandbox#home()}) is used: each sandbox gets the settings it was created with. Default:
     * {@code new LocalSandbox()} ({@code SANDBOX4J_HOME}).
     */
    public Builder engine(LocalSandbox engine) {
      this.engine = ServerEngine.local(Objects.requireNonNull(engine, "engine"));
      return this;
    }

    /**
     * The engine whose sandboxes the server serves: any provider that lists its sandboxes, with how
     * to make one of a requested shape ({@link ServerEngine}). Routes its provider has no
     * capability for answer 501 {@code not_supported}. A data directory serves one provider: a
     * server on a directory that another provider's server used does not build. Default: {@code
     * ServerEngine.local(new LocalSandbox())}.
     */
    public Builder engine(ServerEngine engine) {
      this.engine = Objects.requireNonNull(engine, "engine");
      return this;
    }

    /**
     * Traces requests (a server span per HTTP request and per command on an exec WebSocket, child
     * of the client's W3C {@code traceparent}), the workspaces' operations and the local engine's
     * sandboxes of each shape through {@code openTelemetry}, and reports {@code
     * sandbox4j.sandboxes.active} to it, rather than to the global OpenTelemetry, the default.
     * Lifecycle operations run on the engine's own provider: give a {@link LocalSandbox} engine the
     * same with {@link LocalSandbox.Builder#openTelemetry}.
     */
    public Builder openTelemetry(io.opentelemetry.api.OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry, "openTelemetry");
      return this;
    }

    /**
     * Where the server keeps its database (default {@code <engine home>/server}; required with an
     * engine other than the local one).
     */
    public Builder dataDirectory(Path directory) {
      this.dataDirectory = Objects.requireNonNull(directory, "dataDirectory");
      return this;
    }

    /** The address to listen on (default 127.0.0.1) and port (0, the default: any free one). */
    public Builder bind(String host, int port) {
      if (host == null || host.isBlank()) {
        throw new IllegalArgumentException("host must be an address or name, e.g. 127.0.0.1");
      }
      if (port < 0 || port > 65535) {
        throw new IllegalArgumentException("port must be from 0 to 65535, was " + port);
      }
      this.host = host;
      this.port = port;
      return this;
    }

    /** How many sandboxes one organization may have at once (default 50). */
    public Builder maxSandboxesPerOrganization(int max) {
      if (max < 1) {
        throw new IllegalArgumentException("maxSandboxesPerOrganization must be positive: " + max);
      }
      this.maxSandboxes = max;
      return this;
    }

    /**
     * The create rate limit per organization, a token bucket: up to {@code burst} creates at once,
     * then one per {@code refill} (default 20, then one per second). Forks count too.
     */
    public Builder createRateLimit(int burst, Duration refill) {
      if (burst < 1) {
        throw new IllegalArgumentException("burst must be positive: " + burst);
      }
      if (refill == null || refill.isNegative() || refill.isZero()) {
        throw new IllegalArgumentException("refill must be positive: " + refill);
      }
      this.createBurst = burst;
      this.createRefill = refill;
      return this;
    }

    /**
     * The most CPUs one sandbox may ask for (default: the host's CPUs). A create, or a fork or
     * create from a snapshot of a bigger sandbox, over it is a 400 naming {@code cpus} and the
     * ceiling. The per-sandbox ceilings are admission control for one request; the engine's parent
     * cgroup bounds all sandboxes together.
     */
    public Builder maxCpusPerSandbox(int max) {
      if (max < 1) {
        throw new IllegalArgumentException("maxCpusPerSandbox must be positive: " + max);
      }
      this.maxCpus = max;
      return this;
    }

    /**
     * The most memory one sandbox may ask for, in bytes (default: the host's memory less an eighth
     * of it, at least 1 GiB, for the host). A request that omits {@code memoryBytes} gets the
     * engine's default (4 GiB per CPU) capped at this; one that asks for more is a 400 naming
     * {@code memoryBytes} and the ceiling.
     */
    public Builder maxMemoryPerSandbox(long bytes) {
      if (bytes < SandboxCeilings.MIN_MEMORY) {
        throw new IllegalArgumentException(
            "maxMemoryPerSandbox must be at least 64 MiB: " + bytes + " bytes");
      }
      this.maxMemory = bytes;
      return this;
    }

    /**
     * The most processes one sandbox may ask for (default: a quarter of the host's {@code
     * kernel.pid_max}, at most 32768). A request that omits {@code pids} gets the engine's default
     * capped at this; one that asks for more is a 400 naming {@code pids} and the ceiling.
     */
    public Builder maxPidsPerSandbox(int max) {
      if (max < SandboxCeilings.MIN_PIDS) {
        throw new IllegalArgumentException("maxPidsPerSandbox must be at least 16: " + max);
      }
      this.maxPids = max;
      return this;
    }

    /**
     * The largest disk (writable layer quota) one sandbox may ask for, in bytes (default: a quarter
     * of the size of the file system that holds the engine's home, at least 1 GiB, at most 16 TiB;
     * at least 64 MiB). A request that omits {@code diskBytes} gets the engine's default (10 GiB)
     * capped at this; one that asks for more is a 400 naming {@code diskBytes} and the ceiling.
     */
    public Builder maxDiskPerSandbox(long bytes) {
      if (bytes < SandboxCeilings.MIN_DISK || bytes > SandboxCeilings.MAX_DISK) {
        throw new IllegalArgumentException(
            "maxDiskPerSandbox must be from 64 MiB to 16 TiB: " + bytes + " bytes");
      }
      this.maxDisk = bytes;
      return this;
    }

    /**
     * The most inodes (files, directories, links) one sandbox's disk may ask for (default: the
     * engine's default, 1,000,000; at least 1024, at most 2^31). A request that omits {@code
     * diskInodes} gets the engine's default capped at this; one that asks for more is a 400 naming
     * {@code diskInodes} and the ceiling.
     */
    public Builder maxDiskInodesPerSandbox(long max) {
      if (max < SandboxCeilings.MIN_DISK_INODES || max > SandboxCeilings.MAX_DISK_INODES) {
        throw new IllegalArgumentException(
            "maxDiskInodesPerSandbox must be from 1024 to 2^31: " + max);
      }
      this.maxDiskInodes = max;
      return this;
    }

    /**
     * The isolation of a new sandbox whose create asks for none (default {@link
     * Isolation#CONTAINER}); a create may still ask for the other. Replaces a {@link
     * #forceIsolation} set before. A provider that cannot give it (docker: {@link
     * Isolation#GVISOR}) answers each such create 501 {@code not_supported} naming {@code
     * isolation}.
     */
    public Builder defaultIsolation(Isolation isolation) {
      this.isolation = new IsolationPolicy(Objects.requireNonNull(isolation, "isolation"), false);
      return this;
    }

    /**
     * Gives every new sandbox {@code isolation}, for all organizations: a create that asks for none
     * gets it, one that asks for another is a 400 naming {@code isolation} that says the operator
     * requires it ({@link Isolation#GVISOR}: no tenant's code reaches the host's kernel). Sandboxes
     * made before keep theirs, and since a fork keeps its parent's, a fork of one of another
     * isolation is refused the same way. Replaces a {@link #defaultIsolation} set before.
     */
    public Builder forceIsolation(Isolation isolation) {
      this.isolation = new IsolationPolicy(Objects.requireNonNull(isolation, "isolation"), true);
      return this;
    }

    /**
     * Lets a create name an image by registry reference ({@code python:3.12-slim}, {@code
     * ghcr.io/acme/tool:1}) when it is in {@code registry}: a host ({@code docker.io}, {@code
     * registry.internal:5000}) or a repository prefix in one ({@code docker.io/library}, {@code
     * ghcr.io/acme}). The local engine pulls it on first use, with the server's credentials (its
     * user's {@code ~/.docker/config.json}), and every organization may use it: allow only what all
     * tenants may see. Without any, creates name published images only ({@link ServerImages}). May
     * be called for several.
     *
     * @throws IllegalArgumentException if {@code registry} is not {@code HOST[:PORT][/PATH]}
     */
    public Builder allowRegistry(String registry) {
      registries.add(RegistryAllowlist.checkEntry(registry));
      return this;
    }

    /** The largest JSON body (and WebSocket frame) accepted, in bytes (default 1 MiB). */
    public Builder maxJsonBodyBytes(long max) {
      if (max < 1024 || max > Integer.MAX_VALUE - 1) {
        throw new IllegalArgumentException("maxJsonBodyBytes must be from 1024 to 2^31-2: " + max);
      }
      this.maxJsonBytes = max;
      return this;
    }

    /** Receives one JSON line per request (default: standard error). Never sees a key. */
    public Builder requestLog(Consumer<String> sink) {
      this.requestLog = Objects.requireNonNull(sink, "sink");
      return this;
    }

    /**
     * Mounts {@code servlet} at {@code pathSpec} (e.g. {@code /mcp/*}) behind the API's key check:
     * requests without a valid key get the API's 401, the others reach the servlet with their
     * {@link Tenant} ({@code Tenant.of(request)}) and the user principal {@code
     * org:<organization>}. Async support is on (for event streams). Logged and counted like API
     * requests.
     */
    public Builder servlet(String pathSpec, Servlet servlet) {
      Objects.requireNonNull(servlet, "servlet");
      if (pathSpec == null
          || !pathSpec.startsWith("/")
          || pathSpec.startsWith("/v1")
          || pathSpec.equals("/")
          || pathSpec.startsWith("/metrics")
          || pathSpec.startsWith("/healthz")) {
        throw new IllegalArgumentException(
            "pathSpec must be a path of its own such as /mcp/*, was " + pathSpec);
      }
      mounts.add(new Mount(pathSpec, servlet));
      return this;
    }

    /** How often a silent NDJSON exec stream gets a keepalive event (tests shorten it). */
    Builder keepAlive(Duration interval) {
      this.keepAlive = Objects.requireNonNull(interval, "interval");
      return this;
    }

    /**
     * How long a kept-open exec WebSocket ({@code ?keepOpen=true}) may wait for its next command
     * before the server closes it (default 1 minute). A client that sends its request as the close
     * crosses it sees the socket close without {@code started}, and knows that nothing ran.
     */
    public Builder execSocketIdle(Duration idle) {
      Objects.requireNonNull(idle, "idle");
      if (idle.isNegative() || idle.isZero()) {
        throw new IllegalArgumentException("execSocketIdle must be positive, was " + idle);
      }
      this.execSocketIdle = idle;
      return this;
    }

    /**
     * Builds the server (opening and migrating its database); {@link #start} listens.
     *
     * @throws IllegalStateException if the data directory is missing for an engine other than the
     *     local one, or its database cannot be opened
     * @throws IllegalArgumentException if the data directory serves another provider (a server of
     *     another provider used it first), or the engine's provider cannot list its sandboxes
     */
    public SandboxServer build() {
      if (engine == null) {
        engine = ServerEngine.local(new LocalSandbox());
      }
      if (dataDirectory == null) {
        if (!(engine.provider() instanceof LocalSandbox local)) {
          throw new IllegalStateException(
              "a server on provider '"
                  + engine.provider().name()
                  + "' needs its data directory: set dataDirectory");
        }
        dataDirectory = local.home().resolve("server");
      }
      return new SandboxServer(this);
    }
  }
}
