package dev.sandbox4j.remote;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.EgressRules;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import dev.sandbox4j.workspace.machine.SupportsEgress;
import dev.sandbox4j.workspace.machine.SupportsFork;
import dev.sandbox4j.workspace.machine.SupportsHibernate;
import dev.sandbox4j.workspace.machine.SupportsListing;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import dev.sandbox4j.workspace.machine.SupportsTimers;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * Sandboxes on a sandbox4j server ({@code sandbox4j serve}), reached over its HTTP API: the
 * provider {@code remote}, whose refs are {@code remote:ID}.
 *
 * <p>Configured with the server's URL and an API key, from the builder or from the environment
 * variables {@value #URL_VARIABLE} and {@value #KEY_VARIABLE}. The key goes only into request
 * headers: never into a ref, an exception message or {@code toString}. The other builder options
 * shape the sandboxes {@link #newBackend()} creates, like the local engine's builder.
 *
 * <p>Workspaces keep the whole workspace contract: building a provider or a backend does no I/O,
 * the first operation creates (or attaches), concurrent first use creates exactly one sandbox, and
 * a sandbox the server no longer has (deleted, expired, another organization's) raises {@link
 * WorkspaceUnavailableException}. Commands run over a WebSocket: output reaches the callbacks as it
 * arrives, stdin is streamed, and interrupting the caller cancels the command on the server, which
 * kills its processes. The machine operations ({@link #list}, {@link #suspend}, {@link #fork},
 * {@link #snapshot}, {@link #timers}, {@link #setEgressRules}, ...) are the capabilities of {@link
 * dev.sandbox4j.workspace.machine}, as the local engine's are.
 *
 * <p>Non-goals: no retries (a failed request is reported, not repeated), no interactive terminal
 * (the API has no pty), no port URLs or TCP forwards (the server does not serve sandbox ports: no
 * {@link dev.sandbox4j.workspace.machine.SupportsPorts}), no connection to more than one server per
 * instance. Thread-safe.
 */
public final class RemoteSandbox
    implements WorkspaceProvider,
        SupportsListing,
        SupportsSuspend,
        SupportsStop,
        SupportsHibernate,
        SupportsFork,
        SupportsSnapshots,
        SupportsTimers,
        SupportsEgress {

  /** The provider name in refs: {@code remote}. */
  public static final String NAME = "remote";

  /** The environment variable with the server's URL, e.g. {@code http://127.0.0.1:7070}. */
  public static final String URL_VARIABLE = "SANDBOX4J_URL";

  /** The environment variable with the API key. */
  public static final String KEY_VARIABLE = "SANDBOX4J_API_KEY";

  /** What a server's sandbox id may look like: safe in a URL path segment. */
  private static final Pattern ID = Pattern.compile("[A-Za-z0-9_-]{1,128}");

  private final ServerClient server;
  private final Map<String, String> env;
  private final Options options;

  /** What new sandboxes are created with; every field null for the server's default. */
  private record Options(
      String image,
      String snapshot,
      Integer cpus,
      Long memoryBytes,
      Integer pids,
      String workingDirectory,
      Map<String, String> labels,
      Duration autoSuspendTimeout,
      Duration sandboxTimeout,
      Duration idleTimeout,
      Instant deleteAfter,
      Long diskBytes,
      Long diskInodes,
      String isolation) {}

  /** Runs before each creation (a test seam, see {@link Builder#beforeCreate}). */
  final Runnable beforeCreate;

  private RemoteSandbox(Builder b, URI url, String key) {
    this.server =
        new ServerClient(
            url,
            key,
            b.openTelemetry == null
                ? SandboxTelemetry.global()
                : SandboxTelemetry.of(b.openTelemetry),
            b.pingInterval);
    this.env = Map.copyOf(b.env);
    this.beforeCreate = b.beforeCreate;
    this.options =
        new Options(
            b.image,
            b.snapshot,
            b.cpus,
            b.memoryBytes,
            b.pids,
            b.workingDirectory,
            Map.copyOf(b.labels),
            b.autoSuspendTimeout,
            b.sandboxTimeout,
            b.idleTimeout,
            b.deleteAfter,
            b.diskBytes,
            b.diskInodes,
            b.isolation);
  }

  /** A builder; URL and key default to this process's environment variables. */
  public static Builder builder() {
    return new Builder(System.getenv());
  }

  /**
   * A builder whose URL and key default to {@code environment}'s {@value #URL_VARIABLE} and {@value
   * #KEY_VARIABLE} instead of this process's: for programs that keep their own environment, such as
   * a command line run in-process.
   */
  public static Builder builder(Map<String, String> environment) {
    return new Builder(Objects.requireNonNull(environment, "environment"));
  }

  /**
   * The provider configured by {@value #URL_VARIABLE} and {@value #KEY_VARIABLE}, with default
   * sandboxes. Does no I/O.
   *
   * @throws IllegalStateException naming the variable that is missing or invalid
   */
  public static RemoteSandbox fromEnvironment() {
    return builder().build();
  }

  /** The server's base URL. */
  public URI url() {
    return server.base();
  }

  ServerClient server() {
    return server;
  }

  String workingDirectoryOption() {
    return options.workingDirectory();
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      return Optional.empty();
    }
    return Optional.of(new RemoteBackend(this, checkedId(ref)));
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new RemoteBackend(this, null);
  }

  /** Deletes the sandbox on the server, in any state; one that is already gone is fine. */
  @Override
  public void destroy(WorkspaceRef ref) {
    String id = mine(ref);
    server.execConnections().forget(id);
    server
        .telemetry()
        .lifecycle(
            "destroy",
            NAME,
            id,
            () -> {
              try {
                server.call("DELETE", "/v1/sandboxes/" + id, null, ServerClient.Target.sandbox(id));
              } catch (WorkspaceUnavailableException alreadyGone) {
                // idempotent: gone is what was asked for
              }
            });
  }

  // ---- machine operations -----------------------------------------------------------------------

  /** Every sandbox of the key's organization, sorted by id. */
  @Override
  public List<SandboxInfo> list() {
    return list(Map.of(), null);
  }

  /**
   * The sandboxes of the key's organization that carry every label in {@code labels} and, unless
   * {@code state} is null, are in that state; sorted by id. Follows the server's pages.
   */
  public List<SandboxInfo> list(Map<String, String> labels, String state) {
    Objects.requireNonNull(labels, "labels");
    List<SandboxInfo> all = new ArrayList<>();
    String cursor = null;
    do {
      StringBuilder path = new StringBuilder("/v1/sandboxes?limit=500");
      new TreeMap<>(labels)
          .forEach((k, v) -> path.append("&label=").append(ServerClient.query(k + "=" + v)));
      if (state != null) {
        path.append("&state=").append(ServerClient.query(state));
      }
      if (cursor != null) {
        path.append("&cursor=").append(ServerClient.query(cursor));
      }
      JsonNode page = server.call("GET", path.toString(), null, ServerClient.Target.NONE);
      for (JsonNode item : page.path("items")) {
        all.add(info(item));
      }
      cursor = ServerClient.text(page, "nextCursor");
    } while (cursor != null && !cursor.isEmpty());
    all.sort(java.util.Comparator.comparing(s -> s.ref().id()));
    return all;
  }

  /**
   * What the server knows of one sandbox; empty if it is gone (deleted, expired, or another
   * organization's).
   */
  @Override
  public Optional<SandboxInfo> info(WorkspaceRef ref) {
    String id = mine(ref);
    try {
      return Optional.of(
          info(server.call("GET", "/v1/sandboxes/" + id, null, ServerClient.Target.sandbox(id))));
    } catch (WorkspaceUnavailableException gone) {
      return Optional.empty();
    }
  }

  /**
   * The timers the sandbox was created with, as the server reports them (its Sandbox object); the
   * server cannot change them afterwards.
   */
  @Override
  public Optional<SandboxTimers> timers(WorkspaceRef ref) {
    String id = mine(ref);
    return Optional.ofNullable(
        info(server.call("GET", "/v1/sandboxes/" + id, null, ServerClient.Target.sandbox(id)))
            .timers());
  }

  /** The sandbox's egress rules, header values included (they are the organization's). */
  @Override
  public EgressRules egressRules(WorkspaceRef ref) {
    String id = mine(ref);
    return RemoteEgress.rules(
        server.call(
            "GET", "/v1/sandboxes/" + id + "/egress", null, ServerClient.Target.sandbox(id)));
  }

  /**
   * Replaces the sandbox's egress rules; the server validates them as the local engine does, and a
   * rule it refuses is an {@link IllegalArgumentException} naming it.
   */
  @Override
  public void setEgressRules(WorkspaceRef ref, EgressRules rules) {
    Objects.requireNonNull(rules, "rules");
    String id = mine(ref);
    server.call(
        "PUT",
        "/v1/sandboxes/" + id + "/egress",
        RemoteEgress.json(rules),
        ServerClient.Target.sandbox(id));
  }

  /** Freezes every process of the sandbox, keeping its memory; any later use thaws it. */
  @Override
  public void suspend(WorkspaceRef ref) {
    change(ref, "suspend");
  }

  /** Resumes a suspended sandbox (starts a stopped one, restores a hibernated one). */
  @Override
  public void resume(WorkspaceRef ref) {
    change(ref, "resume");
  }

  /** Ends every process and keeps the files; any later use starts it again. */
  @Override
  public void stop(WorkspaceRef ref) {
    change(ref, "stop");
  }

  /** Starts a stopped sandbox (resumes a suspended one, restores a hibernated one). */
  @Override
  public void start(WorkspaceRef ref) {
    change(ref, "start");
  }

  /** Saves every process to the server's disk and ends them; any later use restores them. */
  @Override
  public void hibernate(WorkspaceRef ref) {
    change(ref, "hibernate");
  }

  private void change(WorkspaceRef ref, String operation) {
    String id = mine(ref);
    server
        .telemetry()
        .lifecycle(
            operation,
            NAME,
            id,
            () -> {
              server.call(
                  "POST",
                  "/v1/sandboxes/" + id + "/" + operation,
                  null,
                  ServerClient.Target.sandbox(id));
            });
  }

  /** A new sandbox with a copy of this one's files and, where the server can, its processes. */
  @Override
  public ForkResult fork(WorkspaceRef ref) {
    return fork(ref, false);
  }

  /** A new sandbox with a copy of this one's files only. */
  @Override
  public ForkResult forkFiles(WorkspaceRef ref) {
    return fork(ref, true);
  }

  private ForkResult fork(WorkspaceRef ref, boolean filesOnly) {
    String id = mine(ref);
    JsonNode answer =
        server
            .telemetry()
            .lifecycle(
                filesOnly ? "fork_files" : "fork",
                NAME,
                id,
                () ->
                    server.call(
                        "POST",
                        "/v1/sandboxes/" + id + "/fork",
                        ServerClient.JSON.createObjectNode().put("filesOnly", filesOnly),
                        ServerClient.Target.sandbox(id)));
    List<String> notCarried = new ArrayList<>();
    answer.path("notCarried").forEach(n -> notCarried.add(n.asText()));
    return new ForkResult(
        info(answer.path("sandbox")).ref(),
        answer.path("processesCopied").asBoolean(false),
        ServerClient.text(answer, "reason"),
        notCarried);
  }

  /** Saves the sandbox's files as the snapshot {@code name} (replacing one of that name). */
  @Override
  public SnapshotInfo snapshot(WorkspaceRef ref, String name) {
    String id = mine(ref);
    Objects.requireNonNull(name, "name");
    return snapshotInfo(
        server
            .telemetry()
            .lifecycle(
                "snapshot",
                NAME,
                id,
                () ->
                    server.call(
                        "POST",
                        "/v1/sandboxes/" + id + "/snapshots",
                        ServerClient.JSON.createObjectNode().put("name", name),
                        ServerClient.Target.sandbox(id))));
  }

  /** The organization's snapshots, sorted by name. */
  @Override
  public List<SnapshotInfo> snapshots() {
    List<SnapshotInfo> all = new ArrayList<>();
    server
        .call("GET", "/v1/snapshots", null, ServerClient.Target.NONE)
        .path("items")
        .forEach(item -> all.add(snapshotInfo(item)));
    all.sort(java.util.Comparator.comparing(SnapshotInfo::name));
    return all;
  }

  /** Removes a snapshot; returns false if there was none of that name. */
  @Override
  public boolean removeSnapshot(String name) {
    Objects.requireNonNull(name, "name");
    return server.delete("/v1/snapshots/" + ServerClient.query(name));
  }

  // ---- JSON -------------------------------------------------------------------------------------

  ObjectNode createRequest() {
    ObjectNode body = ServerClient.JSON.createObjectNode();
    if (options.image() != null) {
      body.put("image", options.image());
    }
    if (options.snapshot() != null) {
      body.put("snapshot", options.snapshot());
    }
    if (options.cpus() != null) {
      body.put("cpus", options.cpus());
    }
    if (options.memoryBytes() != null) {
      body.put("memoryBytes", options.memoryBytes());
    }
    if (options.pids() != null) {
      body.put("pids", options.pids());
    }
    if (options.diskBytes() != null) {
      body.put("diskBytes", options.diskBytes());
    }
    if (options.diskInodes() != null) {
      body.put("diskInodes", options.diskInodes());
    }
    if (options.isolation() != null) {
      body.put("isolation", options.isolation());
    }
    if (!env.isEmpty()) {
      ObjectNode vars = body.putObject("env");
      env.forEach(vars::put);
    }
    if (options.workingDirectory() != null) {
      body.put("workingDirectory", options.workingDirectory());
    }
    if (!options.labels().isEmpty()) {
      ObjectNode labels = body.putObject("labels");
      options.labels().forEach(labels::put);
    }
    if (options.autoSuspendTimeout() != null) {
      body.put("autoSuspendTimeoutMs", options.autoSuspendTimeout().toMillis());
    }
    if (options.sandboxTimeout() != null) {
      body.put("sandboxTimeoutMs", options.sandboxTimeout().toMillis());
    }
    if (options.idleTimeout() != null) {
      body.put("idleTimeoutMs", options.idleTimeout().toMillis());
    }
    if (options.deleteAfter() != null) {
      body.put("deleteAfter", options.deleteAfter().toString());
    }
    return body;
  }

  static SandboxInfo info(JsonNode s) {
    String id = ServerClient.text(s, "id");
    if (id == null || !ID.matcher(id).matches()) {
      throw new WorkspaceException("the server sent a sandbox without a valid id: " + s);
    }
    Map<String, String> labels = new LinkedHashMap<>();
    s.path("labels").properties().forEach(e -> labels.put(e.getKey(), e.getValue().asText()));
    JsonNode t = s.path("timers");
    SandboxTimers timers =
        t.isObject()
            ? new SandboxTimers(
                millis(t.path("autoSuspendTimeoutMs")),
                millis(t.path("sandboxTimeoutMs")),
                millis(t.path("idleTimeoutMs")),
                instant(t.path("deleteAfter")),
                instant(t.path("ends")))
            : null;
    return SandboxInfo.builder(new WorkspaceRef(NAME, id), s.path("state").asText("unknown"))
        .image(ServerClient.text(s, "image"))
        .created(instant(s.path("created")))
        .labels(labels)
        .limits(s.path("cpus").asInt(), s.path("memoryBytes").asLong(), s.path("pids").asInt())
        .workingDirectory(ServerClient.text(s, "workingDirectory"))
        .timers(timers)
        .isolation(ServerClient.text(s, "isolation"))
        .build();
  }

  private static SnapshotInfo snapshotInfo(JsonNode s) {
    String source = ServerClient.text(s, "source");
    WorkspaceRef sourceRef = null;
    if (source != null) {
      try {
        sourceRef =
            source.contains(":") ? WorkspaceRef.parse(source) : new WorkspaceRef(NAME, source);
      } catch (IllegalArgumentException e) {
        sourceRef = null; // the server's own business; the snapshot is still usable
      }
    }
    return new SnapshotInfo(
        ServerClient.text(s, "name"),
        instant(s.path("created")),
        sourceRef,
        ServerClient.text(s, "image"),
        s.path("cpus").asInt(),
        s.path("memoryBytes").asLong(),
        s.path("pids").asInt(),
        s.path("sizeBytes").asLong(),
        0, // the server does not say
        0);
  }

  private static Duration millis(JsonNode value) {
    return value.isNumber() ? Duration.ofMillis(value.asLong()) : null;
  }

  private static Instant instant(JsonNode value) {
    if (!value.isTextual()) {
      return null;
    }
    try {
      return Instant.parse(value.asText());
    } catch (DateTimeParseException e) {
      return null;
    }
  }

  private String mine(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException(ref + " is not a " + NAME + " sandbox");
    }
    return checkedId(ref);
  }

  private static String checkedId(WorkspaceRef ref) {
    if (!ID.matcher(ref.id()).matches()) {
      throw new IllegalArgumentException(
          "malformed remote sandbox id '"
              + ref.id()
              + "': expected letters, digits, '_' and '-' (1 to 128)");
    }
    return ref.id();
  }

  @Override
  public String toString() {
    return "RemoteSandbox[" + server.base() + "]";
  }

  /**
   * Builds a {@link RemoteSandbox}. The URL and key not given here come from {@value #URL_VARIABLE}
   * and {@value #KEY_VARIABLE}; every setter validates its argument and names it on error. Values
   * the server alone can judge (an image's existence, a CPU count it offers) are checked by the
   * server when a sandbox is created.
   */
  public static final class Builder {
    private final Map<String, String> environment;
    private String url;
    private String key;
    private final Map<String, String> env = new LinkedHashMap<>();
    private final Map<String, String> labels = new LinkedHashMap<>();
    private String image;
    private String snapshot;
    private Integer cpus;
    private Long memoryBytes;
    private Integer pids;
    private Long diskBytes;
    private Long diskInodes;
    private String isolation;
    private String workingDirectory;
    private Duration autoSuspendTimeout;
    private Duration sandboxTimeout;
    private Duration idleTimeout;
    private Instant deleteAfter;
    private Runnable beforeCreate = () -> {};
    private io.opentelemetry.api.OpenTelemetry openTelemetry; // null: the global one
    private Duration pingInterval = ServerClient.DEFAULT_PING_INTERVAL;

    Builder(Map<String, String> environment) {
      this.environment = Map.copyOf(environment);
    }

    /**
     * Carries the caller's trace context to the server ({@code traceparent} on every HTTP request
     * and WebSocket upgrade, and in each exec request, with {@code openTelemetry}'s propagators)
     * and traces this provider's lifecycle operations through it, rather than the global
     * OpenTelemetry, the default.
     */
    public Builder openTelemetry(io.opentelemetry.api.OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry, "openTelemetry");
      return this;
    }

    /**
     * How long a running command's connection may be silent before a WebSocket ping checks that the
     * server still answers (default 5 s). A ping unanswered for twice as long ends the command with
     * the connection lost, so a server that vanished without closing never leaves a caller waiting;
     * a command may itself stay silent for as long as it likes. Shorter finds a lost server sooner,
     * behind proxies that cut idle connections too.
     *
     * @throws IllegalArgumentException if {@code interval} is below 100 ms or above 10 minutes
     */
    public Builder pingInterval(Duration interval) {
      Objects.requireNonNull(interval, "pingInterval");
      if (interval.compareTo(Duration.ofMillis(100)) < 0
          || interval.compareTo(Duration.ofMinutes(10)) > 0) {
        throw new IllegalArgumentException(
            "pingInterval must be between 100ms and 10 minutes: " + interval);
      }
      this.pingInterval = interval;
      return this;
    }

    /** The server's base URL ({@code http} or {@code https}), instead of {@value #URL_VARIABLE}. */
    public Builder url(String url) {
      this.url = Objects.requireNonNull(url, "url");
      checkedUrl(url, "url");
      return this;
    }

    /** The server's base URL, instead of {@value #URL_VARIABLE}. */
    public Builder url(URI url) {
      return url(Objects.requireNonNull(url, "url").toString());
    }

    /** The API key, instead of {@value #KEY_VARIABLE}. */
    public Builder apiKey(String key) {
      this.key = checkedKey(Objects.requireNonNull(key, "apiKey"), "apiKey");
      return this;
    }

    /** The image new sandboxes start from (the server's default: {@code default}). */
    public Builder image(String image) {
      this.image = nonBlank(image, "image");
      return this;
    }

    /** The snapshot new sandboxes start from, with the size it was saved with. */
    public Builder snapshot(String snapshot) {
      this.snapshot = nonBlank(snapshot, "snapshot");
      return this;
    }

    /** The CPU quota of new sandboxes. */
    public Builder cpus(int cpus) {
      if (cpus <= 0) {
        throw new IllegalArgumentException("cpus must be positive, was " + cpus);
      }
      this.cpus = cpus;
      return this;
    }

    /** The memory limit of new sandboxes, in bytes. */
    public Builder memory(long bytes) {
      if (bytes <= 0) {
        throw new IllegalArgumentException("memory must be positive, was " + bytes);
      }
      this.memoryBytes = bytes;
      return this;
    }

    /**
     * The byte quota of new sandboxes' writable layer (the server checks the range; its default: 10
     * GiB).
     */
    public Builder disk(long bytes) {
      if (bytes <= 0) {
        throw new IllegalArgumentException("disk must be positive, was " + bytes);
      }
      this.diskBytes = bytes;
      return this;
    }

    /** The inode quota of new sandboxes' writable layer (the server's default: 1,000,000). */
    public Builder diskInodes(long inodes) {
      if (inodes <= 0) {
        throw new IllegalArgumentException("diskInodes must be positive, was " + inodes);
      }
      this.diskInodes = inodes;
      return this;
    }

    /**
     * The isolation of new sandboxes, as the server's API names it: {@code container} or {@code
     * gvisor} (the local engine's {@code Isolation.id()}). The server judges it when a sandbox is
     * created: its operator sets the default, may require one isolation for every sandbox (then
     * asking for another is a 400 naming {@code isolation}), and a server on docker offers only
     * {@code container} (gvisor is a 501 {@code not_supported}).
     */
    public Builder isolation(String isolation) {
      this.isolation = nonBlank(isolation, "isolation");
      return this;
    }

    /** The process-count limit of new sandboxes. */
    public Builder pids(int pids) {
      if (pids <= 0) {
        throw new IllegalArgumentException("pids must be positive, was " + pids);
      }
      this.pids = pids;
      return this;
    }

    /** A variable every command in new sandboxes gets; a later value for the name wins. */
    public Builder env(String name, String value) {
      if (name == null || name.isEmpty() || name.indexOf('=') >= 0 || name.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "invalid env name "
                + (name == null ? "null" : "'" + name + "'")
                + ": must be non-empty, without '=' or NUL");
      }
      if (value == null || value.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "env value of " + name + " must be non-null and contain no NUL");
      }
      env.put(name, value);
      return this;
    }

    /** Every variable of {@code vars}. */
    public Builder env(Map<String, String> vars) {
      Objects.requireNonNull(vars, "env").forEach(this::env);
      return this;
    }

    /** The absolute directory commands start in, created in new sandboxes. */
    public Builder workingDirectory(String path) {
      if (path == null || !path.startsWith("/") || path.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "workingDirectory must be an absolute path without NUL, was " + path);
      }
      this.workingDirectory = path;
      return this;
    }

    /** A label of new sandboxes; {@link #list(Map, String)} filters by labels. */
    public Builder label(String key, String value) {
      nonBlank(key, "label key");
      Objects.requireNonNull(value, "label value");
      labels.put(key, value);
      return this;
    }

    /** Suspend new sandboxes once idle this long (zero: never). */
    public Builder autoSuspendTimeout(Duration timeout) {
      this.autoSuspendTimeout = notNegative(timeout, "autoSuspendTimeout");
      return this;
    }

    /** Destroy new sandboxes this long after their creation. */
    public Builder sandboxTimeout(Duration timeout) {
      this.sandboxTimeout = notNegative(timeout, "sandboxTimeout");
      return this;
    }

    /** Destroy new sandboxes once idle this long (zero: never). */
    public Builder idleTimeout(Duration timeout) {
      this.idleTimeout = notNegative(timeout, "idleTimeout");
      return this;
    }

    /** Destroy new sandboxes at this time; null for no such time. */
    public Builder deleteAfter(Instant when) {
      this.deleteAfter = when;
      return this;
    }

    /**
     * Returns the provider. Does no I/O.
     *
     * @throws IllegalStateException if the URL or key is neither set nor in the environment, naming
     *     the variable
     */
    /**
     * Runs {@code hook} before each sandbox this provider creates, inside the first operation that
     * creates it (tests make creation slow with it: the conformance suite checks that a timeout's
     * clock starts after acquisition). Package-private: not an API.
     */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = Objects.requireNonNull(hook, "hook");
      return this;
    }

    public RemoteSandbox build() {
      String theUrl = url != null ? url : fromEnvironment(URL_VARIABLE, "the server's URL");
      String theKey = key != null ? key : fromEnvironment(KEY_VARIABLE, "an API key");
      URI uri;
      try {
        uri = checkedUrl(theUrl, url != null ? "url" : URL_VARIABLE);
        if (key == null) {
          checkedKey(theKey, KEY_VARIABLE);
        }
      } catch (IllegalArgumentException e) {
        throw new IllegalStateException(e.getMessage(), e);
      }
      return new RemoteSandbox(this, uri, theKey);
    }

    private String fromEnvironment(String variable, String what) {
      String value = environment.get(variable);
      if (value == null || value.isBlank()) {
        throw new IllegalStateException(
            "missing "
                + what
                + " of the sandbox4j server: set "
                + variable
                + " (or pass it to RemoteSandbox.builder())");
      }
      return value.strip();
    }

    private static URI checkedUrl(String text, String name) {
      URI uri;
      try {
        uri = new URI(text.strip());
      } catch (URISyntaxException e) {
        throw new IllegalArgumentException(name + " is not a URL: " + e.getMessage(), e);
      }
      String scheme = uri.getScheme();
      if (scheme == null
          || !(scheme.equalsIgnoreCase("http") || scheme.equalsIgnoreCase("https"))
          || uri.getHost() == null) {
        throw new IllegalArgumentException(
            name
                + " must be an http:// or https:// URL with a host, such as http://127.0.0.1:7070");
      }
      if (uri.getQuery() != null || uri.getFragment() != null || uri.getUserInfo() != null) {
        throw new IllegalArgumentException(
            name + " must not carry a query, fragment or user info: pass the key separately");
      }
      return uri;
    }

    /** A key travels in a header: refuse what could break out of it. The key is never shown. */
    private static String checkedKey(String key, String name) {
      String stripped = key.strip();
      if (stripped.isEmpty()) {
        throw new IllegalArgumentException(name + " is empty");
      }
      for (int i = 0; i < stripped.length(); i++) {
        char c = stripped.charAt(i);
        if (c < 0x21 || c > 0x7e) {
          throw new IllegalArgumentException(
              name + " contains a character that is not printable ASCII (at index " + i + ")");
        }
      }
      return stripped;
    }

    private static String nonBlank(String value, String name) {
      if (value == null || value.isBlank()) {
        throw new IllegalArgumentException(name + " must not be blank");
      }
      return value;
    }

    private static Duration notNegative(Duration value, String name) {
      Objects.requireNonNull(value, name);
      if (value.isNegative()) {
        throw new IllegalArgumentException(name + " must not be negative, was " + value);
      }
      return value;
    }

    @Override
    public String toString() {
      return "RemoteSandbox.Builder[url=" + url + "]";
    }
  }
}
