package dev.sandbox4j.modal;

import dev.sandbox4j.modal.internal.proto.AppGetOrCreateRequest;
import dev.sandbox4j.modal.internal.proto.GenericResult;
import dev.sandbox4j.modal.internal.proto.GenericResult.GenericStatus;
import dev.sandbox4j.modal.internal.proto.NetworkAccess;
import dev.sandbox4j.modal.internal.proto.ObjectCreationType;
import dev.sandbox4j.modal.internal.proto.PortSpec;
import dev.sandbox4j.modal.internal.proto.PortSpecs;
import dev.sandbox4j.modal.internal.proto.Resources;
import dev.sandbox4j.modal.internal.proto.SandboxCreateRequest;
import dev.sandbox4j.modal.internal.proto.SandboxGetTaskIdRequest;
import dev.sandbox4j.modal.internal.proto.SandboxGetTaskIdResponse;
import dev.sandbox4j.modal.internal.proto.SandboxGetTunnelsRequest;
import dev.sandbox4j.modal.internal.proto.SandboxGetTunnelsResponse;
import dev.sandbox4j.modal.internal.proto.SandboxInfo;
import dev.sandbox4j.modal.internal.proto.SandboxListRequest;
import dev.sandbox4j.modal.internal.proto.SandboxListResponse;
import dev.sandbox4j.modal.internal.proto.SandboxSnapshotFsRequest;
import dev.sandbox4j.modal.internal.proto.SandboxSnapshotFsResponse;
import dev.sandbox4j.modal.internal.proto.SandboxTag;
import dev.sandbox4j.modal.internal.proto.SandboxTagsSetRequest;
import dev.sandbox4j.modal.internal.proto.SandboxTerminateRequest;
import dev.sandbox4j.modal.internal.proto.SandboxWaitRequest;
import dev.sandbox4j.modal.internal.proto.SecretGetOrCreateRequest;
import dev.sandbox4j.modal.internal.proto.TunnelData;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.net.URI;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * The {@code modal} provider: workspaces in <a href="https://modal.com">Modal</a> sandboxes,
 * reached over Modal's gRPC protocol (Modal has no Java SDK). Refs are {@code modal:<sandbox id>}.
 *
 * <p>Credentials and the server come from the environment and {@code ~/.modal.toml} as Modal's own
 * clients resolve them ({@code MODAL_TOKEN_ID}, {@code MODAL_TOKEN_SECRET}, {@code MODAL_PROFILE},
 * {@code MODAL_SERVER_URL}, {@code MODAL_ENVIRONMENT}), unless the builder sets them. Building a
 * provider or a backend does no I/O: the first operation of a backend creates its sandbox (or
 * checks that the one its ref names still runs), and a sandbox that is gone, terminated or timed
 * out raises {@link WorkspaceUnavailableException}. Nothing terminates a sandbox except {@link
 * #destroy}; one left alone ends when its sandbox timeout (default 24 hours) or idle timeout runs
 * out, and Modal bills it until then.
 *
 * <p>The settings that shape a sandbox (image, app, cpu, memory, timeouts, secrets, tags, ports)
 * apply to new sandboxes only; the working directory and env apply to every command, also in an
 * attached sandbox. Instances are thread-safe; {@link #close} releases the connections.
 *
 * <p>This client has not been run against the real Modal service: it is tested against a fake built
 * from Modal's public protocol.
 */
public final class ModalSandbox
    implements WorkspaceProvider, dev.sandbox4j.workspace.machine.SupportsListing, AutoCloseable {

  /** The provider name in refs. */
  public static final String NAME = "modal";

  /** The shortest sandbox timeout this client accepts. */
  public static final Duration MIN_SANDBOX_TIMEOUT = Duration.ofSeconds(10);

  /** The longest sandbox timeout, Modal's maximum, and the default. */
  public static final Duration MAX_SANDBOX_TIMEOUT = Duration.ofHours(24);

  /** The app new sandboxes belong to unless the builder names another. */
  public static final String DEFAULT_APP_NAME = "sandbox4j";

  /** Modal's sandbox ids ({@code sb-...}); the check is loose: anything a path segment can hold. */
  private static final Pattern ID = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_-]{0,127}");

  /**
   * How long one {@code SandboxGetTaskId} asks the server to hold the call until the task runs
   * ({@code wait_until_ready}, as Modal's Python client sends after a restore): a new sandbox's
   * first command then starts as soon as its task does, not up to a poll interval later.
   */
  private static final Duration TASK_WAIT = Duration.ofSeconds(50);

  /** The pause before asking again when a server answered at once without a task (libmodal's). */
  private static final Duration TASK_POLL = Duration.ofMillis(500);

  /** How long a new sandbox may take to start its task, as Modal's clients allow (5 minutes). */
  private static final Duration TASK_START_LIMIT = Duration.ofMinutes(5);

  private final Builder options;

  /** The command router of each sandbox this provider reached: one channel per sandbox. */
  private final Map<String, CommandRouter> routers = new java.util.concurrent.ConcurrentHashMap<>();

  private ControlPlane control;
  private String appId;
  private String imageId;

  private ModalSandbox(Builder builder) {
    this.options = builder.copy();
  }

  /** A provider with every option at its default: the environment's credentials. */
  public ModalSandbox() {
    this(new Builder());
  }

  /** Options for a provider. */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    if (!NAME.equals(ref.provider())) {
      return Optional.empty();
    }
    return Optional.of(new ModalWorkspace(this, checkId(ref)));
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new ModalWorkspace(this, null);
  }

  /**
   * Terminates the sandbox with {@code SandboxTerminate}. A sandbox that no longer exists (or has
   * already ended) returns quietly.
   *
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  @Override
  public void destroy(WorkspaceRef ref) {
    String id = checkOwnRef(ref);
    CommandRouter router = routers.remove(id);
    if (router != null) {
      // commands in flight learn the sandbox's end from the router, as Modal ends them
      router.shutdown();
    }
    try {
      control()
          .call(
              s ->
                  s.sandboxTerminate(
                      SandboxTerminateRequest.newBuilder().setSandboxId(id).build()));
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() != Status.Code.NOT_FOUND) {
        throw ModalErrors.translateForSandbox("terminating Modal sandbox " + id, id, e);
      }
    }
  }

  /**
   * The running sandboxes of this provider's app that carry every tag the builder set, sorted by id
   * ({@code SandboxList}, paged by creation time). Modal reports their image, creation time, tags
   * (as labels) and timeout (as the lifetime); a listed sandbox is {@code running}, since finished
   * ones are left out.
   */
  @Override
  public List<dev.sandbox4j.workspace.machine.SandboxInfo> list() {
    List<dev.sandbox4j.workspace.machine.SandboxInfo> all = new ArrayList<>();
    String app = appId();
    double before = 0;
    while (true) {
      SandboxListRequest.Builder request =
          SandboxListRequest.newBuilder()
              .setAppId(app)
              .setEnvironmentName(control().config().environment())
              .setIncludeFinished(false)
              .setBeforeTimestamp(before)
              .addAllTags(tags(options.tags));
      SandboxListResponse page;
      try {
        page = control().call(s -> s.sandboxList(request.build()));
      } catch (StatusRuntimeException e) {
        throw ModalErrors.translate("listing Modal sandboxes", e);
      }
      if (page.getSandboxesCount() == 0) {
        all.sort(java.util.Comparator.comparing(i -> i.ref().id()));
        return all;
      }
      for (SandboxInfo info : page.getSandboxesList()) {
        all.add(info(info));
      }
      before = page.getSandboxes(page.getSandboxesCount() - 1).getCreatedAt();
    }
  }

  /**
   * What {@link #list()} says of {@code ref}'s sandbox; empty if it is not running or not this
   * provider's (Modal has no call that describes one sandbox: this lists them).
   */
  @Override
  public Optional<dev.sandbox4j.workspace.machine.SandboxInfo> info(WorkspaceRef ref) {
    String id = checkOwnRef(ref);
    return list().stream().filter(i -> i.ref().id().equals(id)).findFirst();
  }

  private static dev.sandbox4j.workspace.machine.SandboxInfo info(SandboxInfo sandbox) {
    Map<String, String> labels = new java.util.TreeMap<>();
    for (SandboxTag tag : sandbox.getTagsList()) {
      labels.put(tag.getTagName(), tag.getTagValue());
    }
    double created = sandbox.getCreatedAt();
    return dev.sandbox4j.workspace.machine.SandboxInfo.builder(
            new WorkspaceRef(NAME, sandbox.getId()), "running")
        .image(sandbox.getImageId().isEmpty() ? null : sandbox.getImageId())
        .created(created > 0 ? java.time.Instant.ofEpochMilli(Math.round(created * 1000)) : null)
        .labels(labels)
        .timers(
            new dev.sandbox4j.workspace.machine.SandboxTimers(
                Duration.ZERO,
                Duration.ofSeconds(sandbox.getTimeoutSecs()),
                sandbox.hasIdleTimeoutSecs()
                    ? Duration.ofSeconds(sandbox.getIdleTimeoutSecs())
                    : Duration.ZERO,
                null,
                null))
        .build();
  }

  /**
   * Saves the sandbox's filesystem as a Modal image ({@code SandboxSnapshotFs}) and returns its id,
   * which {@link Builder#imageId} starts new sandboxes from.
   */
  public String snapshotFilesystem(WorkspaceRef ref) {
    String id = checkOwnRef(ref);
    SandboxSnapshotFsResponse response;
    try {
      response =
          control()
              .call(
                  s ->
                      s.sandboxSnapshotFs(
                          SandboxSnapshotFsRequest.newBuilder()
                              .setSandboxId(id)
                              .setTimeout(55)
                              .build()));
    } catch (StatusRuntimeException e) {
      throw failureOf(id, ModalErrors.translateForSandbox("snapshotting " + id, id, e));
    }
    if (response.hasResult()
        && response.getResult().getStatus() != GenericStatus.GENERIC_STATUS_SUCCESS) {
      throw new WorkspaceException(
          "Modal sandbox " + id + ": snapshot failed: " + response.getResult().getException());
    }
    if (response.getImageId().isEmpty()) {
      throw new WorkspaceException("Modal sandbox " + id + ": snapshot returned no image");
    }
    return response.getImageId();
  }

  /**
   * The public URLs of the sandbox's open ports ({@link Builder#openPorts}), by container port:
   * {@code https://host}, with {@code :port} unless it is 443.
   */
  public Map<Integer, URI> tunnels(WorkspaceRef ref) {
    String id = checkOwnRef(ref);
    SandboxGetTunnelsResponse response;
    try {
      response =
          control()
              .call(
                  s ->
                      s.sandboxGetTunnels(
                          SandboxGetTunnelsRequest.newBuilder()
                              .setSandboxId(id)
                              .setTimeout(50)
                              .build()));
    } catch (StatusRuntimeException e) {
      throw failureOf(id, ModalErrors.translateForSandbox("getting tunnels of " + id, id, e));
    }
    if (response.hasResult()
        && response.getResult().getStatus() == GenericStatus.GENERIC_STATUS_TIMEOUT) {
      throw new WorkspaceException("Modal sandbox " + id + ": its tunnels were not ready in time");
    }
    Map<Integer, URI> urls = new TreeMap<>();
    for (TunnelData tunnel : response.getTunnelsList()) {
      String port = tunnel.getPort() == 443 ? "" : ":" + tunnel.getPort();
      urls.put(tunnel.getContainerPort(), URI.create("https://" + tunnel.getHost() + port));
    }
    return urls;
  }

  /** Closes the connections to Modal. Sandboxes keep running. */
  @Override
  public void close() {
    routers.values().forEach(CommandRouter::close);
    routers.clear();
    ControlPlane c;
    synchronized (this) {
      c = control;
      control = null;
    }
    if (c != null) {
      c.close();
    }
  }

  // ---- for ModalWorkspace -------------------------------------------------------------------

  /** The connection, made on first use: config resolution reads the environment and a file. */
  synchronized ControlPlane control() {
    if (control == null) {
      ModalConfig config =
          ModalConfig.resolve(
              options.environmentVariables,
              options.home,
              new ModalConfig.Overrides(
                  options.serverUrl, options.tokenId, options.tokenSecret, options.environment));
      control = new ControlPlane(config, options.clock);
    }
    return control;
  }

  Runnable beforeCreate() {
    return options.beforeCreate;
  }

  /** The working directory the builder was given, or null. */
  String explicitWorkingDirectory() {
    return options.workingDirectory;
  }

  String workingDirectoryOption() {
    if (options.workingDirectory != null) {
      return options.workingDirectory;
    }
    return options.image == null && options.imageId == null
        ? Images.DEFAULT_WORKING_DIRECTORY
        : null;
  }

  Map<String, String> envOption() {
    return options.env;
  }

  private synchronized String appId() {
    if (appId == null) {
      try {
        appId =
            control()
                .call(
                    s ->
                        s.appGetOrCreate(
                                AppGetOrCreateRequest.newBuilder()
                                    .setAppName(options.appName)
                                    .setEnvironmentName(control().config().environment())
                                    .setObjectCreationType(
                                        options.createAppIfMissing
                                            ? ObjectCreationType
                                                .OBJECT_CREATION_TYPE_CREATE_IF_MISSING
                                            : ObjectCreationType.OBJECT_CREATION_TYPE_UNSPECIFIED)
                                    .build())
                            .getAppId());
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() == Status.Code.NOT_FOUND) {
          throw new WorkspaceException(
              "Modal app '" + options.appName + "' not found (createAppIfMissing is false)", e);
        }
        throw ModalErrors.translate("looking up Modal app " + options.appName, e);
      }
    }
    return appId;
  }

  private synchronized String imageId(String app) {
    if (imageId == null) {
      imageId =
          options.imageId != null
              ? options.imageId
              : Images.build(
                  control(),
                  app,
                  options.image == null
                      ? Images.DEFAULT_RECIPE
                      : Images.fromRegistry(options.image));
    }
    return imageId;
  }

  /** Creates a sandbox with the builder's options; returns its id once Modal has accepted it. */
  String create() {
    String app = appId();
    String image = imageId(app);
    List<String> secretIds = new ArrayList<>();
    for (String name : options.secrets) {
      secretIds.add(namedSecret(name));
    }
    dev.sandbox4j.modal.internal.proto.Sandbox.Builder definition =
        dev.sandbox4j.modal.internal.proto.Sandbox.newBuilder()
            .setImageId(image)
            .addAllSecretIds(secretIds)
            .setTimeoutSecs((int) options.sandboxTimeout.toSeconds())
            .setNetworkAccess(
                NetworkAccess.newBuilder()
                    .setNetworkAccessType(NetworkAccess.NetworkAccessType.OPEN))
            .setOpenPorts(openPorts());
    if (options.idleTimeout != null) {
      definition.setIdleTimeoutSecs((int) options.idleTimeout.toSeconds());
    }
    if (options.cpu > 0 || options.memoryMiB > 0) {
      Resources.Builder resources = Resources.newBuilder();
      if (options.cpu > 0) {
        resources.setMilliCpu((int) Math.round(options.cpu * 1000));
      }
      if (options.memoryMiB > 0) {
        resources.setMemoryMb(options.memoryMiB);
      }
      definition.setResources(resources);
    }
    // No workdir in the definition: the seed creates a configured working directory on a new
    // sandbox, which the first command does (mkdir -p); every command then names it itself, so
    // the same applies to a sandbox attached to later. Whether Modal would create a definition's
    // missing workdir is not documented.
    SandboxCreateRequest request =
        SandboxCreateRequest.newBuilder()
            .setAppId(app)
            .setEnvironmentName(control().config().environment())
            .setDefinition(definition)
            .build();
    String id;
    try {
      id = control().call(s -> s.sandboxCreate(request)).getSandboxId();
    } catch (StatusRuntimeException e) {
      throw ModalErrors.translate("creating a Modal sandbox in app " + options.appName, e);
    }
    if (!options.tags.isEmpty()) {
      try {
        control()
            .call(
                s ->
                    s.sandboxTagsSet(
                        SandboxTagsSetRequest.newBuilder()
                            .setEnvironmentName(control().config().environment())
                            .setSandboxId(id)
                            .addAllTags(tags(options.tags))
                            .build()));
      } catch (StatusRuntimeException e) {
        throw ModalErrors.translateForSandbox("tagging Modal sandbox " + id, id, e);
      }
    }
    return id;
  }

  private PortSpecs openPorts() {
    PortSpecs.Builder ports = PortSpecs.newBuilder();
    for (int port : options.openPorts) {
      ports.addPorts(PortSpec.newBuilder().setPort(port));
    }
    return ports.build();
  }

  private static List<SandboxTag> tags(Map<String, String> tags) {
    List<SandboxTag> list = new ArrayList<>();
    tags.forEach((k, v) -> list.add(SandboxTag.newBuilder().setTagName(k).setTagValue(v).build()));
    return list;
  }

  private String namedSecret(String name) {
    try {
      return control()
          .call(
              s ->
                  s.secretGetOrCreate(
                      SecretGetOrCreateRequest.newBuilder()
                          .setDeploymentName(name)
                          .setEnvironmentName(control().config().environment())
                          .build()))
          .getSecretId();
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() == Status.Code.NOT_FOUND) {
        throw new WorkspaceException("Modal secret '" + name + "' not found", e);
      }
      throw ModalErrors.translate("looking up Modal secret " + name, e);
    }
  }

  /**
   * An ephemeral secret holding {@code env}: Modal passes environment variables to a command only
   * as secrets, so every command with env gets one, as Modal's clients do.
   */
  String ephemeralSecret(Map<String, String> env) {
    try {
      return control()
          .call(
              s ->
                  s.secretGetOrCreate(
                      SecretGetOrCreateRequest.newBuilder()
                          .setObjectCreationType(ObjectCreationType.OBJECT_CREATION_TYPE_EPHEMERAL)
                          .putAllEnvDict(env)
                          .setEnvironmentName(control().config().environment())
                          .build()))
          .getSecretId();
    } catch (StatusRuntimeException e) {
      throw ModalErrors.translate("passing the environment to a command", e);
    }
  }

  /**
   * Throws {@link WorkspaceUnavailableException} unless the sandbox runs: {@code SandboxWait} with
   * no timeout answers at once, with a result once the sandbox has ended.
   */
  void requireRunning(String id) {
    Optional<GenericResult> result = result(id);
    if (result.isPresent()) {
      throw ended(id, result.get());
    }
  }

  /** Whether the sandbox has ended (or no longer exists). */
  boolean finished(String id) {
    try {
      return result(id).isPresent();
    } catch (WorkspaceUnavailableException e) {
      return true;
    } catch (WorkspaceException e) {
      return false;
    }
  }

  /**
   * {@code failure} itself, or {@link WorkspaceUnavailableException} if the sandbox has ended: then
   * that is why the operation failed.
   */
  WorkspaceException failureOf(String id, WorkspaceException failure) {
    if (failure instanceof WorkspaceUnavailableException || !finished(id)) {
      return failure;
    }
    return new WorkspaceUnavailableException(
        "Modal sandbox " + id + " has ended: " + failure.getMessage(), failure);
  }

  private Optional<GenericResult> result(String id) {
    try {
      GenericResult result =
          control()
              .call(
                  s ->
                      s.sandboxWait(
                          SandboxWaitRequest.newBuilder().setSandboxId(id).setTimeout(0).build()))
              .getResult();
      return result.getStatus() == GenericStatus.GENERIC_STATUS_UNSPECIFIED
          ? Optional.empty()
          : Optional.of(result);
    } catch (StatusRuntimeException e) {
      throw ModalErrors.translateForSandbox("checking Modal sandbox " + id, id, e);
    }
  }

  /** The command router of sandbox {@code id}, reached once its task runs. */
  CommandRouter router(String id) {
    CommandRouter router = routers.get(id);
    if (router != null) {
      return router;
    }
    CommandRouter fresh = CommandRouter.open(control(), id, taskId(id));
    router = routers.putIfAbsent(id, fresh);
    if (router != null) {
      fresh.close();
      return router;
    }
    return fresh;
  }

  /**
   * The task that runs the sandbox, once it has started ({@code SandboxGetTaskId}, held by the
   * server until the task runs, and asked again until {@link #TASK_START_LIMIT}).
   */
  String taskId(String id) {
    long end = System.nanoTime() + TASK_START_LIMIT.toNanos();
    SandboxGetTaskIdRequest request =
        SandboxGetTaskIdRequest.newBuilder()
            .setSandboxId(id)
            .setWaitUntilReady(true)
            .setTimeout(TASK_WAIT.toSeconds())
            .build();
    while (System.nanoTime() - end < 0) {
      SandboxGetTaskIdResponse response;
      long asked = System.nanoTime();
      try {
        response =
            control()
                .call(
                    s ->
                        s.withDeadlineAfter(
                                TASK_WAIT.plusSeconds(10).toMillis(), TimeUnit.MILLISECONDS)
                            .sandboxGetTaskId(request));
      } catch (StatusRuntimeException e) {
        throw ModalErrors.translateForSandbox("waiting for Modal sandbox " + id, id, e);
      }
      if (response.hasTaskResult()) {
        throw ended(id, response.getTaskResult());
      }
      if (response.hasTaskId() && !response.getTaskId().isEmpty()) {
        return response.getTaskId();
      }
      if (System.nanoTime() - asked < TASK_POLL.toNanos()) {
        Retries.sleep(TASK_POLL); // answered at once without waiting: do not spin
      }
    }
    throw new WorkspaceException(
        "Modal sandbox " + id + " did not start within " + TASK_START_LIMIT);
  }

  /** The exit code Modal's clients give an ended sandbox: 124 timed out, 137 terminated. */
  private static WorkspaceUnavailableException ended(String id, GenericResult result) {
    int code =
        switch (result.getStatus()) {
          case GENERIC_STATUS_TIMEOUT -> 124;
          case GENERIC_STATUS_TERMINATED -> 137;
          default -> result.getExitcode();
        };
    String why = result.getException().isEmpty() ? "" : ": " + result.getException();
    return new WorkspaceUnavailableException(
        "Modal sandbox "
            + id
            + " has ended ("
            + result.getStatus()
            + ", exit "
            + code
            + why
            + "); it is never replaced by a new one");
  }

  private static String checkId(WorkspaceRef ref) {
    if (!ID.matcher(ref.id()).matches()) {
      throw new IllegalArgumentException("not a Modal sandbox id: " + ref);
    }
    return ref.id();
  }

  private static String checkOwnRef(WorkspaceRef ref) {
    if (!NAME.equals(ref.provider())) {
      throw new IllegalArgumentException(
          "ref " + ref + " belongs to provider '" + ref.provider() + "', not to 'modal'");
    }
    return checkId(ref);
  }

  @Override
  public String toString() {
    return "ModalSandbox[app " + options.appName + "]";
  }

  /** Options for a {@link ModalSandbox}. Not thread-safe; {@link #build} copies them. */
  public static final class Builder {
    private String appName = DEFAULT_APP_NAME;
    private boolean createAppIfMissing = true;
    private String image;
    private String imageId;
    private double cpu;
    private int memoryMiB;
    private Duration sandboxTimeout = MAX_SANDBOX_TIMEOUT;
    private Duration idleTimeout;
    private Map<String, String> env = new LinkedHashMap<>();
    private List<String> secrets = new ArrayList<>();
    private String workingDirectory;
    private Map<String, String> tags = new LinkedHashMap<>();
    private Set<Integer> openPorts = new java.util.TreeSet<>();
    private String serverUrl;
    private String tokenId;
    private String tokenSecret;
    private String environment;
    private Map<String, String> environmentVariables = System.getenv();
    private Path home = Path.of(System.getProperty("user.home"));
    private Clock clock = Clock.systemUTC();
    private Runnable beforeCreate = () -> {};

    private Builder() {}

    /** The Modal app new sandboxes belong to (default {@code sandbox4j}). */
    public Builder appName(String name) {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("app name is empty");
      }
      this.appName = name;
      return this;
    }

    /** Whether to create the app when it does not exist (default true). */
    public Builder createAppIfMissing(boolean create) {
      this.createAppIfMissing = create;
      return this;
    }

    /**
     * A registry image for new sandboxes, such as {@code python:3.13-slim}. Default: Debian slim
     * with Python 3.12, git and ripgrep, whose commands start in {@code /root}.
     */
    public Builder image(String registryTag) {
      this.image = Objects.requireNonNull(registryTag, "registryTag");
      this.imageId = null;
      return this;
    }

    /** An image Modal already has, such as one {@link #snapshotFilesystem} returned. */
    public Builder imageId(String id) {
      this.imageId = Objects.requireNonNull(id, "id");
      this.image = null;
      return this;
    }

    /** CPU cores a new sandbox requests (fractions allowed); default Modal's. */
    public Builder cpu(double cores) {
      if (!(cores > 0)) {
        throw new IllegalArgumentException("cpu must be positive: " + cores);
      }
      this.cpu = cores;
      return this;
    }

    /** Memory a new sandbox requests, in MiB; default Modal's. */
    public Builder memoryMiB(int mib) {
      if (mib <= 0) {
        throw new IllegalArgumentException("memory must be positive: " + mib);
      }
      this.memoryMiB = mib;
      return this;
    }

    /**
     * How long a new sandbox lives before Modal ends it, in whole seconds from 10 s to 24 h
     * (default 24 h, Modal's maximum).
     */
    public Builder sandboxTimeout(Duration timeout) {
      this.sandboxTimeout = wholeSeconds("sandbox timeout", timeout);
      if (timeout.compareTo(MIN_SANDBOX_TIMEOUT) < 0
          || timeout.compareTo(MAX_SANDBOX_TIMEOUT) > 0) {
        throw new IllegalArgumentException(
            "sandbox timeout must be between 10 seconds and 24 hours: " + timeout);
      }
      return this;
    }

    /** How long a new sandbox may be idle before Modal ends it, in whole seconds; default never. */
    public Builder idleTimeout(Duration timeout) {
      this.idleTimeout = wholeSeconds("idle timeout", timeout);
      if (timeout.isZero() || timeout.isNegative()) {
        throw new IllegalArgumentException("idle timeout must be positive: " + timeout);
      }
      return this;
    }

    /** A variable every command gets (a command's own env is layered on top). */
    public Builder env(String name, String value) {
      env.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(value, "value"));
      return this;
    }

    /** Variables every command gets. */
    public Builder env(Map<String, String> vars) {
      vars.forEach(this::env);
      return this;
    }

    /** A named Modal secret whose variables every process of a new sandbox gets. */
    public Builder secret(String name) {
      secrets.add(Objects.requireNonNull(name, "name"));
      return this;
    }

    /**
     * The absolute directory commands start in; created on a new sandbox, required to exist in an
     * attached one. Default: {@code /root} on a new sandbox of the default image, else the image's
     * own; an attached sandbox keeps its own (whichever image it was made from).
     */
    public Builder workingDirectory(String dir) {
      if (dir == null || !dir.startsWith("/")) {
        throw new IllegalArgumentException("working directory must be absolute: " + dir);
      }
      this.workingDirectory = dir;
      return this;
    }

    /** A tag set on new sandboxes, and required by {@link ModalSandbox#list}. */
    public Builder tag(String name, String value) {
      tags.put(Objects.requireNonNull(name, "name"), Objects.requireNonNull(value, "value"));
      return this;
    }

    /** Container ports that new sandboxes expose through Modal tunnels ({@link #tunnels}). */
    public Builder openPorts(int... ports) {
      for (int port : ports) {
        if (port < 1 || port > 65535) {
          throw new IllegalArgumentException("not a port: " + port);
        }
        openPorts.add(port);
      }
      return this;
    }

    /** The Modal environment (default: the profile's, else the server's default). */
    public Builder environment(String name) {
      this.environment = Objects.requireNonNull(name, "name");
      return this;
    }

    /** The credentials, instead of the environment's or the profile's. */
    public Builder token(String id, String secret) {
      this.tokenId = Objects.requireNonNull(id, "id");
      this.tokenSecret = Objects.requireNonNull(secret, "secret");
      return this;
    }

    /** The control plane's URL, instead of {@code https://api.modal.com:443}. */
    public Builder serverUrl(String url) {
      this.serverUrl = Objects.requireNonNull(url, "url");
      return this;
    }

    /** Where the config is resolved from: environment variables and home. Not an API. */
    Builder configSource(Map<String, String> variables, Path userHome) {
      this.environmentVariables = Map.copyOf(variables);
      this.home = userHome;
      return this;
    }

    /** The clock auth-token expiry is judged by. Not an API. */
    Builder clock(Clock clock) {
      this.clock = clock;
      return this;
    }

    /** Runs before each sandbox a backend creates (tests make creation slow). Not an API. */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = Objects.requireNonNull(hook, "hook");
      return this;
    }

    public ModalSandbox build() {
      return new ModalSandbox(this);
    }

    private Builder copy() {
      Builder b = new Builder();
      b.appName = appName;
      b.createAppIfMissing = createAppIfMissing;
      b.image = image;
      b.imageId = imageId;
      b.cpu = cpu;
      b.memoryMiB = memoryMiB;
      b.sandboxTimeout = sandboxTimeout;
      b.idleTimeout = idleTimeout;
      b.env = Map.copyOf(env);
      b.secrets = List.copyOf(secrets);
      b.workingDirectory = workingDirectory;
      b.tags = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(tags));
      b.openPorts = Set.copyOf(openPorts);
      b.serverUrl = serverUrl;
      b.tokenId = tokenId;
      b.tokenSecret = tokenSecret;
      b.environment = environment;
      b.environmentVariables = environmentVariables;
      b.home = home;
      b.clock = clock;
      b.beforeCreate = beforeCreate;
      return b;
    }

    private static Duration wholeSeconds(String what, Duration d) {
      Objects.requireNonNull(d, what);
      if (d.getNano() != 0) {
        throw new IllegalArgumentException(what + " must be whole seconds: " + d);
      }
      return d;
    }
  }
}
