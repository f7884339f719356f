package dev.sandbox4j.boxd;

import dev.sandbox4j.boxd.BoxdCalls.Retry;
import dev.sandbox4j.boxd.BoxdCalls.Target;
import dev.sandbox4j.boxd.internal.proto.DestroyVmRequest;
import dev.sandbox4j.boxd.internal.proto.GetVmResponse;
import dev.sandbox4j.boxd.internal.proto.ListVmsRequest;
import dev.sandbox4j.boxd.internal.proto.StopVmRequest;
import dev.sandbox4j.boxd.internal.proto.SuspendVmRequest;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import dev.sandbox4j.workspace.machine.SupportsListing;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import dev.sandbox4j.workspace.machine.SupportsTimers;
import java.net.URI;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.regex.Pattern;

/**
 * Machines on boxd (boxd.sh), reached over boxd's public gRPC API: the provider {@code boxd}, whose
 * refs are {@code boxd:ID} with the machine's id.
 *
 * <p>Credentials come from the builder or the environment, in the order boxd's SDK reads them: a
 * token given to the builder, an API key given to the builder, {@value #TOKEN_VARIABLE}, {@value
 * #KEY_VARIABLE}. An API key ({@code bxd_…}) is exchanged for a JWT at the token URL and renewed
 * before it expires; a token is used as it is. The service is {@value #BASE_URL_VARIABLE} (default
 * {@code https://boxd.sh:9443}; {@code http://} means plaintext). Credentials never appear in a
 * ref, an exception message or {@code toString}.
 *
 * <p>Workspaces keep the workspace contract: building does no I/O; the first operation creates an
 * isolated machine (or attaches to the ref's, which must be isolated and on no named network) and
 * waits until it runs; a parked machine is resumed, woken or started; a machine that is gone raises
 * {@link WorkspaceUnavailableException}. Commands run over the {@code Exec} stream as boxd's user
 * {@code boxd} (passwordless sudo) in the working directory (default {@value
 * #DEFAULT_WORKING_DIRECTORY}); a timeout, the output limit, interruption, and boxd's own limit of
 * {@link #NO_OUTPUT_LIMIT} without output cancel the call, which kills the command's processes.
 * Files go through commands (boxd's API has an upload stream, {@link #upload}, but no download call
 * known in public), and are binary-safe.
 *
 * <p>Non-goals: fork, hibernate, listing snapshots, per-port URLs and TCP forwards (their RPCs are
 * not in the public material this client was written from), authentication from inside a boxd
 * machine, and a pty. This client has not been run against the real boxd service: it was built from
 * boxd's public docs and clients and tested against a fake. Thread-safe.
 */
public final class BoxdSandbox
    implements WorkspaceProvider,
        SupportsListing,
        SupportsSuspend,
        SupportsStop,
        SupportsSnapshots,
        SupportsTimers {

  /** The provider name in refs: {@code boxd}. */
  public static final String NAME = "boxd";

  /** A JWT, used as it is (or an API key, if it starts with {@code bxd_}). */
  public static final String TOKEN_VARIABLE = "BOXD_TOKEN";

  /** An API key, exchanged for tokens. */
  public static final String KEY_VARIABLE = "BOXD_API_KEY";

  /** The API's address, such as {@code https://boxd.sh:9443}. */
  public static final String BASE_URL_VARIABLE = "BOXD_BASE_URL";

  /** Where API keys are exchanged for tokens (as boxd's Go clients name it). */
  public static final String TOKEN_URL_VARIABLE = "BOXD_TOKEN_URL";

  /** The default token endpoint, the one boxd's current clients use. */
  public static final String DEFAULT_TOKEN_URL = "https://app.boxd.sh/api/v1/auth/token";

  /** boxd's user's home, where commands start unless told otherwise. */
  public static final String DEFAULT_WORKING_DIRECTORY = "/home/boxd";

  /** boxd drops a command that printed nothing for this long; it ends as a timeout. */
  public static final Duration NO_OUTPUT_LIMIT = Duration.ofMinutes(30);

  /** The vCPU counts a new machine may have; each vCPU comes with 4 GiB of memory. */
  public static final List<Integer> SIZE_CLASSES = List.of(1, 2, 4, 8);

  static final Pattern ID = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,127}");
  private static final Pattern MACHINE_NAME = Pattern.compile("[a-z][a-z0-9-]{0,62}");

  private final BoxdCalls calls;
  private final BoxdMachines machines;
  private final BoxdSnapshots snapshots;
  private final BoxdTokens tokens;
  private final BoxdOptions options;
  private final BoxdCreation creation;

  private BoxdSandbox(Builder b, String credential, BoxdEndpoint endpoint, URI tokenUrl) {
    this.tokens = new BoxdTokens(credential, tokenUrl, b.clock);
    this.calls = new BoxdCalls(endpoint, tokens);
    this.options =
        new BoxdOptions(
            b.name,
            b.image,
            b.vcpu,
            b.snapshot,
            Map.copyOf(b.env),
            b.workingDirectory,
            b.autoSuspendTimeout,
            b.autoDestroyTimeout,
            b.noOutputLimit,
            b.readyTimeout,
            b.snapshotTimeout,
            b.beforeCreate);
    this.machines = new BoxdMachines(calls, b.readyTimeout);
    this.snapshots = new BoxdSnapshots(calls);
    this.creation = new BoxdCreation(calls, machines, snapshots, options);
  }

  /** A builder whose credentials and address default to this process's environment. */
  public static Builder builder() {
    return new Builder(System.getenv());
  }

  /** A builder whose defaults come from {@code environment} instead of this process's. */
  public static Builder builder(Map<String, String> environment) {
    return new Builder(Objects.requireNonNull(environment, "environment"));
  }

  /**
   * The provider configured by the environment, with default machines. Does no I/O.
   *
   * @throws IllegalStateException if neither {@value #TOKEN_VARIABLE} nor {@value #KEY_VARIABLE} is
   *     set
   */
  public static BoxdSandbox fromEnvironment() {
    return builder().build();
  }

  /** The API's address, e.g. {@code https://boxd.sh:9443}. */
  public String baseUrl() {
    return calls.endpoint().toString();
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
    return Optional.of(new BoxdBackend(this, checkedId(ref)));
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new BoxdBackend(this, null);
  }

  /**
   * Deletes the machine in any state; one that is already gone is fine. Refuses a machine that is
   * not isolated, as the seed's BoxdSandbox does.
   */
  @Override
  public void destroy(WorkspaceRef ref) {
    String id = mine(ref);
    Optional<GetVmResponse> vm = machines.find(id);
    if (vm.isEmpty()) {
      return;
    }
    if (!vm.get().getIsolated()) {
      throw new WorkspaceException(
          "refusing to destroy the boxd machine " + id + ": it is not isolated");
    }
    try {
      calls.unary(
          "DestroyVm",
          Target.machine(id),
          Retry.SAFE,
          s -> s.destroyVm(DestroyVmRequest.newBuilder().setVmId(id).build()));
    } catch (WorkspaceUnavailableException alreadyGone) {
      // idempotent: gone is what was asked for
    }
  }

  // ---- machine operations -----------------------------------------------------------------------

  /** Every machine the credentials' organization has, sorted by id. */
  @Override
  public List<SandboxInfo> list() {
    List<SandboxInfo> all = new ArrayList<>();
    for (GetVmResponse vm :
        calls
            .unary(
                "ListVms",
                Target.NONE,
                Retry.SAFE,
                s -> s.listVms(ListVmsRequest.getDefaultInstance()))
            .getVmsList()) {
      if (!BoxdMachines.GONE.contains(vm.getStatus())) {
        all.add(info(vm));
      }
    }
    all.sort(Comparator.comparing(s -> s.ref().id()));
    return all;
  }

  @Override
  public Optional<SandboxInfo> info(WorkspaceRef ref) {
    return machines.find(mine(ref)).map(this::info);
  }

  /**
   * The machine's timers as boxd reports them: auto-suspend after idle network time, and
   * auto-destroy seconds after start as its lifetime ({@code sandboxTimeout}). boxd's other timers
   * (auto-hibernate, delete-after, idle-destroy) have no place in the record or no known field; the
   * lifetime's end is not given, since boxd counts it from the start, not the creation.
   */
  @Override
  public Optional<SandboxTimers> timers(WorkspaceRef ref) {
    return Optional.of(timers(machines.get(mine(ref))));
  }

  private static SandboxTimers timers(GetVmResponse vm) {
    return new SandboxTimers(
        Duration.ofSeconds(vm.getAutoSuspendTimeoutSecs()),
        Duration.ofSeconds(vm.getAutoDestroyTimeoutSecs()),
        Duration.ZERO,
        null,
        null);
  }

  /** Parks the machine with its memory kept; a later command resumes it. Idempotent. */
  @Override
  public void suspend(WorkspaceRef ref) {
    String id = mine(ref);
    String status = machines.get(id).getStatus();
    if (status.equals("suspended") || status.equals("stopped") || status.equals("hibernated")) {
      return;
    }
    calls.unary(
        "SuspendVm",
        Target.machine(id),
        Retry.SAFE,
        s -> s.suspendVm(SuspendVmRequest.newBuilder().setVmId(id).build()));
  }

  /** Brings the machine back to running: resumes, wakes or starts it as its state needs. */
  @Override
  public void resume(WorkspaceRef ref) {
    machines.awaken(mine(ref));
  }

  /** Powers the machine off, keeping its disk (run {@code sync} first: the page cache is lost). */
  @Override
  public void stop(WorkspaceRef ref) {
    String id = mine(ref);
    if (machines.get(id).getStatus().equals("stopped")) {
      return;
    }
    calls.unary(
        "StopVm",
        Target.machine(id),
        Retry.SAFE,
        s -> s.stopVm(StopVmRequest.newBuilder().setVmId(id).build()));
  }

  /** Starts a stopped machine (and resumes or wakes a parked one), then waits until it runs. */
  @Override
  public void start(WorkspaceRef ref) {
    machines.awaken(mine(ref));
  }

  /** Wakes a hibernated machine (and resumes or starts one parked otherwise). */
  public void wake(WorkspaceRef ref) {
    machines.awaken(mine(ref));
  }

  /**
   * The machine's public HTTPS address ({@code https://NAME.boxd.sh}), which serves the one port
   * boxd picked for it (the first of 80, 443, 8080, 8000, 3000, 5000, 5173 that listens, else
   * 8000). Anyone can reach it.
   *
   * @throws WorkspaceUnavailableException if the machine is gone
   */
  public URI publicUrl(WorkspaceRef ref) {
    GetVmResponse vm = machines.get(mine(ref));
    if (vm.getAccessDomain().isEmpty()) {
      throw new WorkspaceException("boxd reports no public address for machine " + vm.getVmId());
    }
    return URI.create("https://" + vm.getAccessDomain());
  }

  /**
   * Saves the running machine (memory and disk) as snapshot {@code name} and waits until boxd
   * reports it ready. Saving under an existing name makes a new version of it.
   */
  @Override
  public SnapshotInfo snapshot(WorkspaceRef ref, String name) {
    String id = mine(ref);
    Objects.requireNonNull(name, "name");
    machines.awaken(id); // boxd saves running machines only
    var info = snapshots.save(id, name, options.snapshotTimeout());
    return new SnapshotInfo(
        info.getName(),
        null,
        new WorkspaceRef(NAME, id),
        null,
        info.getVcpu(),
        info.getMemoryBytes(),
        0,
        info.getSizeBytes(),
        0,
        0);
  }

  /**
   * Not supported: the public material this client was written from names no RPC that lists
   * snapshots.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public List<SnapshotInfo> snapshots() {
    throw new UnsupportedOperationException(
        "listing snapshots is not supported by boxd's client: its RPC is not publicly documented");
  }

  @Override
  public boolean removeSnapshot(String name) {
    Objects.requireNonNull(name, "name");
    return snapshots.remove(name);
  }

  /**
   * Writes {@code content} to {@code path} with boxd's upload stream ({@code UploadFileStream}),
   * which creates missing parent directories, as the user {@code boxd}. Unlike {@code
   * Workspace.write} (which goes through commands) it neither replaces the file atomically nor is
   * documented to write through symlinks.
   *
   * @return the number of bytes boxd reports written
   * @throws WorkspaceUnavailableException if the machine is gone
   */
  public long upload(WorkspaceRef ref, String path, byte[] content) {
    String id = mine(ref);
    Objects.requireNonNull(path, "path");
    if (!path.startsWith("/")) {
      throw new IllegalArgumentException("upload needs an absolute path: " + path);
    }
    machines.awaken(id);
    return BoxdUpload.send(calls, id, path, content);
  }

  // ---- what backends use -----------------------------------------------------------------------

  String workingDirectoryOption() {
    return options.workingDirectory();
  }

  Map<String, String> env() {
    return options.env();
  }

  BoxdMachines machines() {
    return machines;
  }

  boolean renewableToken() {
    return tokens.renewable();
  }

  CommandResult exec(String vmId, String line, RunOptions runOptions) {
    return BoxdExec.run(calls, vmId, line, runOptions, options.noOutputLimit());
  }

  /**
   * Creates a machine as configured and waits until it runs. {@code onId} learns the id as soon as
   * boxd returns it, before the machine runs.
   */
  String create(Consumer<String> onId) {
    return creation.create(onId);
  }

  /** An existing machine: isolated, on no network, and running once this returns. */
  void attach(String vmId) {
    creation.attach(vmId);
  }

  private SandboxInfo info(GetVmResponse vm) {
    SandboxInfo.Builder b =
        SandboxInfo.builder(new WorkspaceRef(NAME, vm.getVmId()), vm.getStatus())
            .limits(vm.getVcpu(), vm.getMemoryBytes(), 0)
            .networks(vm.getNetworksList())
            .timers(timers(vm));
    if (!vm.getImageRef().isEmpty()) {
      b.image(vm.getImageRef());
    }
    if (vm.getDiskBytes() > 0) {
      b.disk(vm.getDiskBytes(), 0);
    }
    return b.build();
  }

  private String mine(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException(
          "the ref " + ref + " belongs to the provider '" + ref.provider() + "', not to boxd");
    }
    return checkedId(ref);
  }

  private static String checkedId(WorkspaceRef ref) {
    if (!ID.matcher(ref.id()).matches()) {
      throw new IllegalArgumentException("not a boxd machine id: " + ref.id());
    }
    return ref.id();
  }

  @Override
  public String toString() {
    return "BoxdSandbox[" + calls.endpoint() + "]";
  }

  /**
   * Options for {@link BoxdSandbox}. Every setter validates its argument and names it on error;
   * {@link #build()} resolves what was not set from the environment.
   */
  public static final class Builder {
    private final Map<String, String> environment;
    private String apiKey;
    private String token;
    private String baseUrl;
    private String tokenUrl;
    private String name;
    private String image;
    private Integer vcpu;
    private String snapshot;
    private final Map<String, String> env = new LinkedHashMap<>();
    private String workingDirectory = DEFAULT_WORKING_DIRECTORY;
    private Duration autoSuspendTimeout;
    private Duration autoDestroyTimeout;
    Duration noOutputLimit = NO_OUTPUT_LIMIT;
    Duration readyTimeout = Duration.ofMinutes(5);
    Duration snapshotTimeout = Duration.ofMinutes(10);
    Runnable beforeCreate = () -> {};
    Clock clock = Clock.systemUTC();

    private Builder(Map<String, String> environment) {
      this.environment = Map.copyOf(environment);
    }

    /** An API key ({@code bxd_…}); wins over the environment, loses to {@link #token}. */
    public Builder apiKey(String key) {
      this.apiKey = nonBlank(key, "apiKey");
      return this;
    }

    /** A JWT used as it is (it cannot be renewed); wins over everything else. */
    public Builder token(String token) {
      this.token = nonBlank(token, "token");
      return this;
    }

    /** The API's address; {@code http://} for plaintext (default {@code https://boxd.sh:9443}). */
    public Builder baseUrl(String url) {
      BoxdEndpoint.parse(nonBlank(url, "baseUrl"));
      this.baseUrl = url;
      return this;
    }

    /** Where API keys are exchanged (default {@value #DEFAULT_TOKEN_URL}). */
    public Builder tokenUrl(String url) {
      checkTokenUrl(nonBlank(url, "tokenUrl"));
      this.tokenUrl = url;
      return this;
    }

    /**
     * The name of the machine {@link #newBackend()} creates: a lowercase letter, then lowercase
     * letters, digits and dashes; unique in the organization (a second machine of that name is
     * refused). Default: boxd picks one.
     */
    public Builder machineName(String name) {
      if (name == null || !MACHINE_NAME.matcher(name).matches()) {
        throw new IllegalArgumentException(
            "a boxd machine name starts with a lowercase letter and has only a-z, 0-9 and '-': "
                + name);
      }
      this.name = name;
      return this;
    }

    /** The image a new machine starts from (default boxd's, Ubuntu 24.04). */
    public Builder image(String image) {
      this.image = nonBlank(image, "image");
      return this;
    }

    /** vCPUs of a new machine: 1, 2, 4 or 8, with 4 GiB of memory each (default: the org's). */
    public Builder vcpu(int vcpu) {
      if (!SIZE_CLASSES.contains(vcpu)) {
        throw new IllegalArgumentException("vcpu must be one of " + SIZE_CLASSES + ": " + vcpu);
      }
      this.vcpu = vcpu;
      return this;
    }

    /**
     * New machines start from this snapshot (name or id), with the size it was saved at. An unknown
     * snapshot, or one still being saved, raises {@link WorkspaceUnavailableException} on first
     * use.
     */
    public Builder snapshot(String snapshot) {
      this.snapshot = nonBlank(snapshot, "snapshot");
      return this;
    }

    /** A variable every command gets (a command's own env wins); also given to a new machine. */
    public Builder env(String name, String value) {
      if (name == null || name.isEmpty() || name.contains("=") || name.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "env name must be non-empty, without '=' or NUL: " + name);
      }
      if (value == null || value.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "env value of " + name + " must be non-null, without NUL");
      }
      env.put(name, value);
      return this;
    }

    /** Variables every command gets. */
    public Builder env(Map<String, String> vars) {
      Objects.requireNonNull(vars, "env").forEach(this::env);
      return this;
    }

    /**
     * The absolute directory commands start in (default {@value #DEFAULT_WORKING_DIRECTORY});
     * created on a new machine, must exist on one attached to.
     */
    public Builder workingDirectory(String path) {
      if (path == null || !path.startsWith("/") || path.indexOf('\0') >= 0) {
        throw new IllegalArgumentException("workingDirectory must be an absolute path: " + path);
      }
      String normal = path.replaceAll("/+", "/");
      if (normal.length() > 1 && normal.endsWith("/")) {
        normal = normal.substring(0, normal.length() - 1);
      }
      for (String part : normal.split("/")) {
        if (part.equals(".") || part.equals("..")) {
          throw new IllegalArgumentException("workingDirectory must be canonical: " + path);
        }
      }
      this.workingDirectory = normal;
      return this;
    }

    /** Idle network time before boxd suspends a new machine; zero turns it off (default boxd's). */
    public Builder autoSuspendTimeout(Duration idle) {
      this.autoSuspendTimeout = seconds(idle, "autoSuspendTimeout");
      return this;
    }

    /** Time after start before boxd destroys a new machine; zero for never (the default). */
    public Builder autoDestroyTimeout(Duration lifetime) {
      this.autoDestroyTimeout = seconds(lifetime, "autoDestroyTimeout");
      return this;
    }

    /** A test seam: how long a command may print nothing (boxd's own limit is 30 minutes). */
    Builder noOutputLimit(Duration limit) {
      this.noOutputLimit = limit;
      return this;
    }

    /** A test seam: runs before each creation. */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = hook;
      return this;
    }

    /** A test seam: the clock token expiry is judged by. */
    Builder clock(Clock clock) {
      this.clock = clock;
      return this;
    }

    Builder readyTimeout(Duration timeout) {
      this.readyTimeout = timeout;
      return this;
    }

    /**
     * The provider. Does no I/O.
     *
     * @throws IllegalStateException if there are no credentials, naming the variables looked at
     * @throws IllegalArgumentException if {@code vcpu} and {@code snapshot} are both set (a machine
     *     from a snapshot keeps the size it was saved at)
     */
    public BoxdSandbox build() {
      if (vcpu != null && snapshot != null) {
        throw new IllegalArgumentException(
            "vcpu cannot be combined with snapshot: a machine from a snapshot keeps its saved size");
      }
      String credential =
          firstNonBlank(
              token, apiKey, environment.get(TOKEN_VARIABLE), environment.get(KEY_VARIABLE));
      if (credential == null) {
        throw new IllegalStateException(
            "no boxd credentials: set "
                + KEY_VARIABLE
                + " (a key from 'boxd auth keys create') or "
                + TOKEN_VARIABLE
                + ", or give apiKey/token to the builder (authenticating from inside a boxd"
                + " machine is not supported)");
      }
      String base =
          firstNonBlank(
              baseUrl,
              environment.get(BASE_URL_VARIABLE),
              environment.get("BOXD_API_URL"),
              BoxdEndpoint.DEFAULT_BASE_URL);
      BoxdEndpoint endpoint;
      try {
        endpoint = BoxdEndpoint.parse(base);
      } catch (IllegalArgumentException e) {
        throw new IllegalStateException(BASE_URL_VARIABLE + ": " + e.getMessage(), e);
      }
      String tokens =
          firstNonBlank(tokenUrl, environment.get(TOKEN_URL_VARIABLE), DEFAULT_TOKEN_URL);
      return new BoxdSandbox(this, credential, endpoint, checkTokenUrl(tokens));
    }

    private static URI checkTokenUrl(String url) {
      URI uri;
      try {
        uri = URI.create(url);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("not a token URL: " + url, e);
      }
      if (!"https".equalsIgnoreCase(uri.getScheme()) && !"http".equalsIgnoreCase(uri.getScheme())) {
        throw new IllegalArgumentException("a token URL is http(s)://…: " + url);
      }
      return uri;
    }

    private static String firstNonBlank(String... values) {
      for (String v : values) {
        if (v != null && !v.isBlank()) {
          return v.strip();
        }
      }
      return null;
    }

    private static String nonBlank(String value, String what) {
      if (value == null || value.isBlank()) {
        throw new IllegalArgumentException(what + " must not be blank");
      }
      return value;
    }

    private static Duration seconds(Duration d, String what) {
      if (d == null || d.isNegative() || d.toSeconds() > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(what + " must be zero or positive seconds: " + d);
      }
      return d;
    }
  }
}
