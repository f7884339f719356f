package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.HostLimits;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.ports.PortTokens;
import dev.sandbox4j.runtime.internal.registry.RegistryCredentials;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
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
import dev.sandbox4j.workspace.machine.SupportsPorts;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import dev.sandbox4j.workspace.machine.SupportsTimers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Isolated Linux sandboxes on this machine: the provider {@code local}, whose workspaces are
 * sandboxes (see {@link dev.sandbox4j.runtime}).
 *
 * <pre>{@code
 * LocalSandbox sandboxes = new LocalSandbox();
 * Workspace ws = Workspace.of(sandboxes.newBackend());   // created on first use
 * ws.run(Command.shell("sudo apt-get -v && node -v"));
 * WorkspaceRef ref = ws.open();                          // local:<id>: attach from any JVM
 * sandboxes.destroy(ref);                                // sandboxes outlive the JVM
 * }</pre>
 *
 * <p>{@code image} (or {@code snapshot}), {@code user}, {@code cpus}, {@code memory}, {@code pids}
 * and labels shape a new sandbox only; {@code workingDirectory}, {@code env} and {@code
 * noOutputTimeout} apply to every command, also after attaching. The working directory is created
 * in a new sandbox and must already exist in one attached to. A sandbox's user, and its own working
 * directory and environment (which those settings override), come from its image and stay with it
 * ({@link Builder#image}).
 *
 * <p>A sandbox can be suspended (with the cgroup freezer), stopped (its processes ended and its
 * root file system unmounted), hibernated, forked (files, and processes where checkpoint/restore
 * works) and saved as a snapshot ({@link #suspend}, {@link #stop}, {@link #hibernate}, {@link
 * #fork}, {@link #snapshot}); any operation on a suspended, stopped or hibernated sandbox wakes it.
 * These are the machine capabilities of {@link dev.sandbox4j.workspace.machine} ({@link
 * SupportsListing}, {@link SupportsSuspend}, {@link SupportsStop}, {@link SupportsHibernate},
 * {@link SupportsFork}, {@link SupportsSnapshots}), which a remote server's sandboxes have too, as
 * they have {@link SupportsTimers} and {@link SupportsEgress}; {@link SupportsPorts} completes them
 * here. Named networks, images and the shell are this engine's own.
 *
 * <p>Timers ({@link Builder#autoSuspendTimeout}, {@link Builder#sandboxTimeout} — 24 hours by
 * default —, {@link Builder#idleTimeout}, {@link Builder#deleteAfter}) are kept with a new sandbox
 * and enforced by a supervisor process per state directory that the engine starts in the background
 * and that outlives the JVM ({@code $SANDBOX4J_HOME/supervisor.log}); a sandbox a timer ended
 * raises {@link WorkspaceUnavailableException} saying which.
 *
 * <p>Every sandbox's ports are served on the host by that supervisor: {@link #url} gives {@code
 * http://{port}-{id}.localhost:{proxyPort}/} (HTTP/1.1, WebSocket and {@code h2c} upgrades pass
 * through; a request wakes a sleeping sandbox), optionally guarded by a per-sandbox token ({@link
 * Builder#portToken}, {@link #portToken}); {@link #forwardTcp} forwards a host port to a sandbox
 * port for any other protocol.
 *
 * <p>A warm pool ({@link Builder#warmPool}) keeps sandboxes of this shape created ahead of need, so
 * that a new backend's first operation takes about as long as a command; {@link #close} destroys
 * the ones not handed out.
 *
 * <p>Constructing does no I/O (with a warm pool, a thread of its own starts creating). The first
 * operation needs root, Linux, an OCI runtime and a prepared host ({@code sandbox4j doctor}); the
 * first sandbox on a machine builds the default image (about a minute; {@code progress} reports
 * it). Instances are thread-safe.
 */
public final class LocalSandbox
    implements WorkspaceProvider,
        SupportsListing,
        SupportsSuspend,
        SupportsStop,
        SupportsHibernate,
        SupportsFork,
        SupportsSnapshots,
        SupportsTimers,
        SupportsEgress,
        SupportsPorts,
        AutoCloseable {

  /** The provider name in refs. */
  public static final String NAME = "local";

  /** The engine's state directory unless {@code SANDBOX4J_HOME} says otherwise. */
  public static final Path DEFAULT_HOME = SandboxHome.DEFAULT;

  private static final long GIB = 1L << 30;

  /** The largest warm pool a builder takes: each member holds memory and a share of the host. */
  static final int MAX_WARM_POOL = 64;

  private final Path home;
  private final String runtimeName;
  private final SandboxShape shape;
  private final Map<String, String> env;
  private final long diskReserve; // -1: the engine's default
  private final long maxImageSize;
  private final double diskOvercommit;
  private final Consumer<String> progress;
  private final Duration noOutputTimeout;
  private final Timers.Config timers;
  private final boolean portToken;
  private final LocalImages images;
  private final LocalNetworking networking;
  private final HostLimits.Sandboxes sandboxesLimits;
  private final Runnable beforeCreate;
  private final WarmPool warmPool; // null: none
  private final LocalSandbox poolOwner; // null: none; see Builder#warmPoolOf
  private final SandboxTelemetry telemetry;
  private volatile Engine engine;

  /** Sandboxes with every default: see {@link Builder}. */
  public LocalSandbox() {
    this(builder());
  }

  private LocalSandbox(Builder b) {
    this.home = b.home != null ? b.home : defaultHome();
    this.runtimeName = b.runtime;
    List<String> networks = List.copyOf(new java.util.TreeSet<>(b.networks));
    this.shape =
        new SandboxShape(
            b.image,
            b.workingDirectory,
            b.cpus,
            b.memoryBytes != 0 ? b.memoryBytes : 4 * GIB * b.cpus,
            b.pids,
            b.diskBytes == 0 && b.diskInodes == 0
                ? null
                : new SandboxDisk.Limit(
                    b.diskBytes != 0 ? b.diskBytes : SandboxDisk.DEFAULT_BYTES,
                    b.diskInodes != 0 ? b.diskInodes : SandboxDisk.DEFAULT_INODES),
            Map.copyOf(b.labels),
            b.snapshot,
            b.egress,
            networks,
            b.isolation,
            b.user);
    this.env = Map.copyOf(b.env);
    this.diskReserve = b.diskReserve;
    this.maxImageSize = b.maxImageSize;
    this.diskOvercommit = b.diskOvercommit;
    this.progress = b.progress;
    this.beforeCreate = b.beforeCreate;
    this.telemetry =
        b.openTelemetry == null ? SandboxTelemetry.global() : SandboxTelemetry.of(b.openTelemetry);
    this.noOutputTimeout = b.noOutputTimeout;
    this.timers =
        new Timers.Config(b.autoSuspendTimeout, b.sandboxTimeout, b.idleTimeout, b.deleteAfter);
    this.portToken = b.portToken;
    this.images =
        new LocalImages(
            Engine.imageStore(home),
            progress,
            RegistryCredentials.fromEnvironment(b.registryCredentials),
            b.plainHttpRegistries,
            b.maxImageSize,
            this::diskReserve);
    this.networking = new LocalNetworking(this, networks);
    this.sandboxesLimits = b.sandboxesLimits;
    this.warmPool = b.warmPool > 0 ? new WarmPool(this, b.warmPool) : null;
    this.poolOwner = b.poolOwner;
  }

  /**
   * Why this host cannot give a sandbox {@code isolation}, in one line that names the fix (for
   * {@link Isolation#GVISOR}: no runsc that answers {@code runsc --version}; {@code sandbox4j
   * setup} installs it); empty when it can. The check a create makes, without creating anything.
   */
  public static java.util.Optional<String> unavailable(Isolation isolation) {
    return isolation == Isolation.GVISOR
        ? dev.sandbox4j.runtime.internal.oci.Gvisor.unavailable()
        : java.util.Optional.empty();
  }

  /** A builder starting from the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  private static Path defaultHome() {
    String env = System.getenv("SANDBOX4J_HOME");
    return env == null || env.isBlank() ? DEFAULT_HOME : Path.of(env);
  }

  @Override
  public String name() {
    return NAME;
  }

  /** The state directory. */
  public Path home() {
    return home;
  }

  /**
   * The free space, in bytes, below which a create or fork is refused with {@link
   * InsufficientDiskException} (see {@link Builder#diskReserve}).
   */
  public long diskReserve() {
    return diskReserve >= 0 ? diskReserve : SandboxDisk.defaultReserve(home);
  }

  /**
   * The most an image pulled from a registry may hold, in bytes ({@link Builder#maxImageSize});
   * {@link Long#MAX_VALUE}: no bound.
   */
  public long maxImageSize() {
    return maxImageSize;
  }

  /**
   * How far sandboxes' disks may overcommit the free space (see {@link Builder#diskOvercommit}).
   */
  public double diskOvercommit() {
    return diskOvercommit;
  }

  /** Where this provider's spans and metrics go (lifecycle here, creation in its backends). */
  SandboxTelemetry telemetry() {
    return telemetry;
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new LocalSandboxBackend(this, null);
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      return Optional.empty();
    }
    SandboxHome.checkId(ref.id());
    return Optional.of(new LocalSandboxBackend(this, ref.id()));
  }

  @Override
  public void destroy(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException(
          "cannot destroy " + ref + ": it belongs to provider '" + ref.provider() + "', not local");
    }
    telemetry.lifecycle("destroy", NAME, ref.id(), () -> engine().destroy(ref.id()));
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  @Override
  public void suspend(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    telemetry.lifecycle("suspend", NAME, id, () -> new Lifecycle(engine()).suspend(id));
  }

  /**
   * Saves every process of {@code ref}'s sandbox to disk with checkpoint/restore (CRIU) and ends
   * them, freeing their memory; its files are kept. Any operation on it (or {@link #resume})
   * restores the processes where they were, with their memory. Commands still attached to a caller
   * (started through {@code Workspace.run}/{@code start} and still running) cannot be carried and
   * are ended; processes started in the background from a command ({@code nohup ... &}) are
   * carried. Idempotent; a stopped sandbox stays stopped.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws WorkspaceException if checkpoint/restore is unavailable on this host (the message says
   *     why: {@code sandbox4j setup} installs it) or the checkpoint fails (the message says what
   *     became of the sandbox: it goes on running, or is stopped)
   */
  @Override
  public void hibernate(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    telemetry.lifecycle("hibernate", NAME, id, () -> new Lifecycle(engine()).hibernate(id));
  }

  @Override
  public void resume(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    telemetry.lifecycle("resume", NAME, id, () -> new Lifecycle(engine()).start(id));
  }

  @Override
  public void stop(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    telemetry.lifecycle("stop", NAME, id, () -> new Lifecycle(engine()).stop(id));
  }

  @Override
  public void start(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    telemetry.lifecycle("start", NAME, id, () -> new Lifecycle(engine()).start(id));
  }

  /**
   * A new running sandbox with a copy of {@code ref}'s files (copy-on-write where the file system
   * supports it) and of its running processes, on the same image, with the same size and labels;
   * afterwards the two change and run independently (a server started in the parent serves in the
   * fork too, on the fork's own loopback). A running parent is frozen while its processes are
   * checkpointed and its files copied (a few hundred ms), then goes on.
   *
   * <p>Processes are copied with checkpoint/restore (CRIU): {@link ForkResult#processesCopied()}
   * says whether they were, {@link ForkResult#reason()} why not, and {@link
   * ForkResult#notCarried()} lists those left out — commands still attached to a caller (started
   * through {@code Workspace.run}/{@code start}); processes started in the background from a
   * command ({@code nohup ... &}) are carried. A suspended parent is resumed first, like for any
   * operation; a hibernated one stays hibernated and the fork is restored from its checkpoint; a
   * stopped one has no processes, so only its files are copied. Where checkpoint/restore is
   * unavailable (see {@code sandbox4j doctor}), or fails, only the files are copied and the fork
   * starts with only its init: the result says so, never silently.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   */
  @Override
  public ForkResult fork(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    return telemetry.lifecycle(
        "fork",
        NAME,
        id,
        () -> {
          networking.checkNetworkAccess(id, "fork");
          return forkResult(new Lifecycle(engine()).fork(id, progress, PortTokens::inherit));
        });
  }

  /**
   * A new sandbox with a copy of {@code ref}'s files only, like {@link #fork} where
   * checkpoint/restore is unavailable, but by choice: faster, since no process is checkpointed (a
   * running parent is frozen only while its writable layer is copied). The fork starts with only
   * its init; {@link ForkResult#reason()} says that only the files were asked for.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   */
  @Override
  public ForkResult forkFiles(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    return telemetry.lifecycle(
        "fork_files",
        NAME,
        id,
        () -> {
          networking.checkNetworkAccess(id, "fork");
          return forkResult(new Lifecycle(engine()).fork(id, progress, false, PortTokens::inherit));
        });
  }

  private static ForkResult forkResult(Lifecycle.Forked fork) {
    WorkspaceRef ref = new WorkspaceRef(NAME, fork.id());
    return fork.processesCopied()
        ? new ForkResult(ref, true, "", fork.notCarried())
        : new ForkResult(ref, false, fork.reason());
  }

  // ---- networking ----------------------------------------------------------------------------

  /**
   * Replaces the egress policy of {@code ref}'s sandbox. It takes effect at once for new
   * connections (connections already open are kept), and for the proxy variables ({@code
   * HTTP_PROXY} ...) of commands started from now on. The policy, header values included, is kept
   * in a root-only file of the state directory, never in the sandbox. A policy that intercepts TLS
   * installs the egress proxy's CA certificate into the sandbox's trust store (and wakes it for
   * that).
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws WorkspaceException if it was created before sandboxes had networks (loopback only)
   */
  public void setEgress(WorkspaceRef ref, EgressPolicy policy) {
    networking.setEgress(ref, policy);
  }

  /**
   * The egress policy of {@code ref}'s sandbox ({@link EgressPolicy#none()} for one created before
   * sandboxes had networks).
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   */
  public EgressPolicy egress(WorkspaceRef ref) {
    return networking.egress(ref);
  }

  /**
   * {@link #egress} as the machine capability's value.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   */
  @Override
  public EgressRules egressRules(WorkspaceRef ref) {
    return egress(ref).toRules();
  }

  /**
   * {@link #setEgress} with the policy {@code rules} state ({@link EgressPolicy#of}).
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws IllegalArgumentException naming the first rule that is malformed or refused
   * @throws WorkspaceException if it was created before sandboxes had networks (loopback only)
   */
  @Override
  public void setEgressRules(WorkspaceRef ref, EgressRules rules) {
    setEgress(ref, EgressPolicy.of(rules));
  }

  void checkNetworkAccess(String id, String what) {
    networking.checkNetworkAccess(id, what);
  }

  /**
   * Saves {@code ref}'s files as snapshot {@code name}, an image new sandboxes start from ({@link
   * Builder#snapshot}) with this sandbox's size. A running sandbox is frozen while its files are
   * copied. The snapshot is usable only once complete; one of the same name is replaced (sandboxes
   * made from it keep theirs), but an image that is not a snapshot is not.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws IllegalArgumentException if an image that is not a snapshot has that name
   */
  @Override
  public SnapshotInfo snapshot(WorkspaceRef ref, String name) {
    return telemetry.lifecycle(
        "snapshot", NAME, ref.id(), () -> images.snapshot(this::engine, ref, name));
  }

  /** The complete snapshots on this machine (of this state directory), sorted by name. */
  @Override
  public List<SnapshotInfo> snapshots() {
    return images.snapshots();
  }

  /**
   * Removes snapshot {@code name}. Sandboxes made from it keep running on its files.
   *
   * @return whether there was such a snapshot
   * @throws IllegalArgumentException if an image of that name is not a snapshot
   */
  @Override
  public boolean removeSnapshot(String name) {
    return images.removeSnapshot(name);
  }

  /** Every sandbox on this machine (of this state directory), sorted by id. */
  @Override
  public List<SandboxInfo> list() {
    return LocalInfos.list(engine());
  }

  /**
   * What {@link #list} says of {@code ref}'s sandbox, reading its files only; empty if it does not
   * exist (or is being created or destroyed right now).
   */
  @Override
  public Optional<SandboxInfo> info(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    return LocalInfos.info(engine(), id);
  }

  /**
   * The timers {@code ref}'s sandbox was created with ({@link Builder#autoSuspendTimeout} ...), or
   * empty for one made before timers existed; a fork has its parent's, its lifetime counted from
   * the fork. They cannot be changed afterwards.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist, or a timer ended it
   */
  @Override
  public Optional<SandboxTimers> timers(WorkspaceRef ref) {
    String id = LocalRefs.localId(ref);
    Engine e = engine();
    e.record(id); // unavailable if gone, saying which timer ended it
    return Timers.read(e.dir(id)).map(Timers.Settings::toPublic);
  }

  // ---- ports -------------------------------------------------------------------------------

  /**
   * The URL on this host that serves port {@code port} of {@code ref}'s sandbox: {@code
   * http://{port}-{id}.localhost:{proxyPort}/}, answered by the state directory's supervisor (which
   * this starts if needed). The proxy's port is 7780 for the default state directory; another one
   * gets a free port, chosen once and kept in {@code $SANDBOX4J_HOME/network/proxy-port}. Clients
   * that do not resolve {@code *.localhost} to 127.0.0.1 by themselves can connect to {@code
   * 127.0.0.1:proxyPort} and send the URL's host as the {@code Host} header.
   *
   * <p>A request wakes a suspended, hibernated or stopped sandbox and counts as activity for its
   * idle timers. If the sandbox has a token ({@link #portToken}), each connection's first request
   * must carry it in header {@code X-Sandbox4j-Token} or query parameter {@code s4j_token}, else it
   * gets 401 and nothing reaches the sandbox; the token is removed from that request before it is
   * forwarded. Nothing listening on the port gives 502; a sandbox that does not exist, 404.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws IllegalArgumentException if {@code port} is not from 1 to 65535
   */
  @Override
  public java.net.URI url(WorkspaceRef ref, int port) {
    return networking.url(ref, port);
  }

  /**
   * The access token of {@code ref}'s port URLs, if it was created with one ({@link
   * Builder#portToken}). It is kept in the state directory, readable by root only, and never in the
   * sandbox.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   */
  @Override
  public Optional<String> portToken(WorkspaceRef ref) {
    return networking.portToken(ref);
  }

  /**
   * Forwards a port on 127.0.0.1 of this host to port {@code port} of {@code ref}'s sandbox, raw
   * TCP, and returns the host port. The supervisor listens on it until the sandbox is destroyed
   * (also across supervisor restarts, on the same port where it is still free); asking again for
   * the same sandbox port returns the same host port. Each connection wakes a sleeping sandbox and
   * counts as activity; one that finds nothing listening is closed at once. There is no token: any
   * local process that can connect to the host port reaches the sandbox port.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws IllegalArgumentException if {@code port} is not from 1 to 65535
   */
  @Override
  public int forwardTcp(WorkspaceRef ref, int port) {
    return networking.forwardTcp(ref, port);
  }

  /**
   * Removes what crashes left behind: sandboxes interrupted while being created or destroyed, and
   * containers, mounts, cgroups and image builds that belong to nothing; and the tombstones of
   * sandboxes that a timer ended more than 7 days ago. Running sandboxes are never touched. Returns
   * a line per thing removed.
   */
  public List<String> gc() {
    Engine e = engine();
    List<String> removed = new java.util.ArrayList<>(e.gc());
    removed.addAll(Timers.gcTombstones(home));
    Supervisor.ensureRunning(e);
    return removed;
  }

  /**
   * Deletes the image layers that no image, sandbox or build in progress uses, what interrupted
   * image builds left, and partial downloads of pulls that are not running (a pull started again
   * then downloads those blobs from the start). Returns a line per thing removed. Part of {@link
   * #gc()}.
   */
  public List<String> gcImages() {
    return engine().images().gc();
  }

  /** The images on this machine (of this state directory), sorted by name. */
  public List<ImageInfo> images() {
    return images.images();
  }

  /**
   * Builds the default image (Debian bookworm with dev tools, from Debian's archive with {@code
   * mmdebstrap}; about a minute), reporting to {@code progress}. Without {@code rebuild} an image
   * that is already built is kept; with it, a new one replaces it in one rename, and sandboxes
   * created before keep running on the old files. Needs root.
   *
   * @return the image
   */
  public ImageInfo buildDefaultImage(boolean rebuild) {
    return images.buildDefault(rebuild);
  }

  /**
   * Removes the image called {@code name} (or pulled as reference {@code name}). Sandboxes created
   * from it keep running: they hold on to its layers, which are deleted only once nothing uses them
   * (see {@link #gc()}).
   *
   * @return whether there was such an image
   */
  public boolean removeImage(String name) {
    return images.removeImage(name);
  }

  /**
   * The canonical form of image reference {@code reference}, as {@link #pullImage} reads it: {@code
   * python:3.12} is {@code docker.io/library/python:3.12}, {@code ghcr.io/o/a} is {@code
   * ghcr.io/o/a:latest}.
   *
   * @throws IllegalArgumentException naming what is wrong with it
   */
  public static String canonicalImageReference(String reference) {
    return dev.sandbox4j.runtime.internal.registry.ImageReference.parse(reference).toString();
  }

  /** Whether {@code image} names a registry reference rather than an image of this machine. */
  public static boolean isImageReference(String image) {
    return dev.sandbox4j.runtime.internal.registry.ImageReference.looksLikeReference(image);
  }

  /**
   * Pulls image {@code reference} from its OCI Distribution registry ({@code python:3.12-slim},
   * {@code ghcr.io/org/app:1.2}, {@code name@sha256:...}; Docker Hub's defaults apply), reporting
   * to the progress receiver, and returns it. It is stored under a name of its own ({@link
   * ImageInfo#name()}) with its reference and digest; pulling again replaces it if the registry's
   * manifest changed, and downloads only layers this machine does not have. Sandboxes use it by
   * either name ({@link Builder#image}), which pulls it first if it is not here yet.
   *
   * <p>Credentials: the builder's {@link Builder#registryAuth}, else the docker CLI's ({@code
   * ~/.docker/config.json}: its credential helpers, then {@code auths}), else none. Loopback
   * registries and {@link Builder#plainHttpRegistry} ones are spoken to over HTTP, all others over
   * HTTPS. The image's config ({@code User}, {@code WorkingDir}, {@code Env}) is how its sandboxes
   * run, unless the builder says otherwise. Needs root.
   *
   * @throws IllegalArgumentException if {@code reference} is not a valid reference
   * @throws ImageTooLargeException if the image is larger than {@link Builder#maxImageSize}
   * @throws InsufficientDiskException if pulling it would take the disk below {@link
   *     Builder#diskReserve}
   * @throws dev.sandbox4j.workspace.WorkspaceException if the registry refuses (the message names
   *     why: not found, credentials, digest mismatch) or cannot be reached
   */
  public ImageInfo pullImage(String reference) {
    return images.pull(Objects.requireNonNull(reference, "reference"));
  }

  /**
   * Pushes image {@code name} (a snapshot too, or an image by the reference it was pulled as) to
   * registry reference {@code reference} ({@code ghcr.io/org/app:1.2}; a tag, no digest), as an OCI
   * image that any host pulls ({@link #pullImage}, {@code docker pull}) to create sandboxes from.
   * Layers the registry has already are not uploaded again. The image's config says how to run it:
   * a pulled or imported image's own, else the user, working directory and environment Sandbox4j
   * runs its own images with; a snapshot's size (cpus, memory, pids, disk) goes into labels {@code
   * dev.sandbox4j.snapshot.*}. Credentials and plain HTTP as for {@link #pullImage}. Needs root.
   *
   * @return the reference pushed, with the digest the registry knows it by ({@code
   *     ghcr.io/org/app:1.2@sha256:...})
   * @throws IllegalArgumentException if {@code reference} is not a valid reference with a tag, or
   *     has a digest
   * @throws dev.sandbox4j.workspace.WorkspaceException if there is no such image, or the registry
   *     refuses (the message names why and where the credentials came from) or cannot be reached
   */
  public String pushImage(String name, String reference) {
    return images.push(
        Objects.requireNonNull(name, "name"), Objects.requireNonNull(reference, "reference"));
  }

  /**
   * Runs an interactive login shell ({@code /bin/bash -l}, or {@code /bin/sh -l} in an image
   * without bash) as the sandbox's user in {@code ref}'s sandbox, on this process's terminal, and
   * returns its exit status when it exits.
   *
   * <p>The shell gets a terminal of its own: {@code crun exec -t} allocates it and relays this
   * process's stdin and stdout, which must be a terminal (check before calling). It starts in the
   * working directory with the sandbox's environment plus this process's {@code TERM}, in a cgroup
   * of its own under the sandbox's limits, like any command. Processes it leaves in the background
   * keep running, as they do after a command.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the sandbox is gone
   * @throws WorkspaceException if its image has neither {@code /bin/bash} nor {@code /bin/sh}
   * @throws java.util.concurrent.CancellationException if this thread is interrupted; the shell and
   *     everything it started are killed
   */
  public int shell(WorkspaceRef ref) {
    return LocalShell.run(this, ref);
  }

  String workingDirectory() {
    return shape.workingDirectory();
  }

  Map<String, String> env() {
    return env;
  }

  /**
   * How many sandboxes the warm pool holds ready now ({@link Builder#warmPool}); 0 without one. A
   * new backend's first operation takes one if there is one, and the pool makes another in the
   * background.
   */
  public int warmSandboxes() {
    return warmPool == null ? 0 : warmPool.ready();
  }

  /**
   * Stops the warm pool, if there is one, and destroys the sandboxes it holds ready (after the one
   * it may be creating). Sandboxes it handed out, and every other one, stay. A backend's first
   * operation after this creates its sandbox afresh. Idempotent; without a warm pool it does
   * nothing. A shutdown hook does the same when the JVM exits.
   */
  @Override
  public void close() {
    if (warmPool != null) {
      warmPool.close();
    }
  }

  /**
   * The warm pool a new backend takes its sandbox from: this provider's own, or that of the
   * provider {@link Builder#warmPoolOf} named if it makes the same sandboxes.
   */
  Optional<WarmPool> warmPool() {
    if (warmPool != null) {
      return Optional.of(warmPool);
    }
    if (poolOwner != null && poolOwner.warmPool != null && sameSandboxesAs(poolOwner)) {
      return Optional.of(poolOwner.warmPool);
    }
    return Optional.empty();
  }

  /**
   * Whether this provider and {@code other} make the same sandboxes but for labels, timers and env
   * (what a claim from a warm pool sets): same home, runtime, image or snapshot, user, size,
   * working directory, egress policy, networks, isolation and port token.
   */
  boolean sameSandboxesAs(LocalSandbox other) {
    return home.equals(other.home)
        && Objects.equals(runtimeName, other.runtimeName)
        && portToken == other.portToken
        && shape.withLabels(Map.of()).equals(other.shape.withLabels(Map.of()));
  }

  /** Runs before each creation (a test seam, see {@link Builder#beforeCreate}). */
  Runnable beforeCreate() {
    return beforeCreate;
  }

  Consumer<String> progress() {
    return progress;
  }

  Duration noOutputTimeout() {
    return noOutputTimeout;
  }

  Timers.Config timers() {
    return timers;
  }

  boolean portToken() {
    return portToken;
  }

  /**
   * What a new sandbox is made of.
   *
   * @throws WorkspaceUnavailableException if its snapshot does not exist (or is still being saved)
   */
  Engine.Spec spec() {
    SandboxShape s =
        shape.snapshot() == null ? shape.withImage(images.localName(shape.image())) : shape;
    return s.spec(images.store());
  }

  /** The engine, checked and built on first use. */
  Engine engine() {
    Engine e = engine;
    if (e == null) {
      synchronized (this) {
        if (engine == null) {
          engine = openEngine();
        }
        e = engine;
      }
    }
    return e;
  }

  private Engine openEngine() {
    LocalRefs.requireLinuxAndRoot();
    return Engine.open(
        home, images.store(), runtimeName, sandboxesLimits, diskReserve, diskOvercommit);
  }

  /** Builds a {@link LocalSandbox}; every setter validates its argument and names it on error. */
  public static final class Builder {
    private Path home;
    private String runtime; // null: the default crun
    private String image = ImageStore.DEFAULT;
    private String workingDirectory; // null: the sandbox's own (its image's, or /home/sandbox)
    private String user; // null: the image's
    private final Map<String, String> env = new LinkedHashMap<>();
    private int cpus = 1;
    private long memoryBytes;
    private int pids = HostLimits.defaultSandboxPids();
    private long diskBytes;
    private long diskInodes;
    private long diskReserve = -1;
    private double diskOvercommit = SandboxDisk.DEFAULT_OVERCOMMIT;
    private final List<String> sizeSettings = new java.util.ArrayList<>();
    private HostLimits.Sandboxes sandboxesLimits; // null: derived from the host
    private boolean imageSet;
    private String snapshot;
    private Duration noOutputTimeout = Duration.ofMinutes(30);
    private Duration autoSuspendTimeout = Duration.ZERO;
    private Duration sandboxTimeout = Timers.MAX_LIFETIME;
    private Duration idleTimeout = Duration.ZERO;
    private java.time.Instant deleteAfter;
    private boolean portToken;
    private final Map<String, String> labels = new LinkedHashMap<>();
    private EgressPolicy egress = EgressPolicy.all();
    private final java.util.Set<String> networks = new java.util.TreeSet<>();
    private Isolation isolation = Isolation.CONTAINER;
    private Consumer<String> progress =
        line -> System.getLogger(LocalSandbox.class.getName()).log(System.Logger.Level.INFO, line);
    private Runnable beforeCreate = () -> {};
    private int warmPool;
    private LocalSandbox poolOwner;
    private io.opentelemetry.api.OpenTelemetry openTelemetry; // null: the global one
    private final Map<String, RegistryCredentials.Credentials> registryCredentials =
        new LinkedHashMap<>();
    private final java.util.Set<String> plainHttpRegistries = new java.util.TreeSet<>();
    private long maxImageSize = Long.MAX_VALUE;

    private Builder() {}

    /**
     * Runs {@code hook} before each sandbox a backend of this provider creates, inside the first
     * operation that creates it (tests make creation slow with it: the conformance suite checks
     * that a timeout's clock starts after acquisition). Package-private: not an API.
     */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = Objects.requireNonNull(hook, "hook");
      return this;
    }

    /**
     * Traces the lifecycle operations (create, fork, snapshot, suspend, hibernate, stop, start,
     * destroy: spans {@code sandbox4j.OPERATION}) and times create and fork through {@code
     * openTelemetry} rather than the global OpenTelemetry, the default. Commands and file
     * operations are traced by {@code Workspace} ({@code Workspace.withOpenTelemetry}).
     */
    public Builder openTelemetry(io.opentelemetry.api.OpenTelemetry openTelemetry) {
      this.openTelemetry = Objects.requireNonNull(openTelemetry, "openTelemetry");
      return this;
    }

    /** The state directory (default {@code $SANDBOX4J_HOME}, else {@code /var/lib/sandbox4j}). */
    public Builder home(Path home) {
      this.home = Objects.requireNonNull(home, "home").toAbsolutePath().normalize();
      return this;
    }

    /**
     * The limits of all sandboxes together instead of those derived from the host ({@link
     * HostLimits#sandboxes()}): for tests, with a private {@link #home}, whose parent cgroup is its
     * own.
     */
    Builder sandboxesLimits(HostLimits.Sandboxes limits) {
      this.sandboxesLimits = Objects.requireNonNull(limits, "limits");
      return this;
    }

    /**
     * The OCI runtime: {@code crun}, {@code runc}, {@code runsc}, or a path to one; a name is
     * looked up on PATH. By default, the crun that {@code sandbox4j setup} built into {@code
     * /usr/local/libexec/sandbox4j/crun} when the system's crun was older than 1.9, else {@code
     * crun} on PATH.
     */
    public Builder runtime(String runtime) {
      this.runtime = SettingChecks.runtime(runtime);
      return this;
    }

    /**
     * The boundary between a new sandbox's code and the host's kernel (default {@link
     * Isolation#CONTAINER}). {@link Isolation#GVISOR} runs it under gVisor's {@code runsc}, which
     * {@code sandbox4j setup} installs: the same image, user, limits, egress, port URLs, timers,
     * suspend, snapshot and files-only fork; hibernate, a live fork and an interactive terminal
     * fail saying they are not supported with gVisor, and {@code sudo} fails (gVisor runs no
     * set-user-ID executables). A sandbox keeps its isolation for its whole life, and its forks
     * inherit it.
     */
    public Builder isolation(Isolation isolation) {
      this.isolation = Objects.requireNonNull(isolation, "isolation");
      return this;
    }

    /**
     * The image of a new sandbox (default {@code default}: Debian bookworm with dev tools): the
     * name of an image on this machine ({@link LocalSandbox#images()}), or a registry reference
     * ({@code python:3.12-slim}, {@code ghcr.io/org/app@sha256:...}), pulled when the first sandbox
     * is created if this machine does not have it yet (see {@link LocalSandbox#pullImage}). A name
     * that is no image here is pulled as a reference too, from Docker Hub.
     *
     * <p>Sandbox4j's own images (the default, images built from an {@link ImageRecipe}, snapshots
     * of their sandboxes, and root filesystem tarballs) follow the seeds' conventions: commands run
     * as user {@code sandbox} (1000:1000, passwordless {@code sudo} in the default image) in {@code
     * /home/sandbox}, with {@code PATH}, {@code HOME=/home/sandbox}, {@code USER=sandbox} and
     * {@code LANG=C.UTF-8}. An image that came from elsewhere (imported from an OCI layout or
     * {@code docker save} archive, or pulled from a registry) runs as its image config says: its
     * {@code User} (root if it names none; a name is looked up in the image's {@code /etc/passwd}
     * and {@code /etc/group}, without supplementary groups), its {@code WorkingDir} ({@code /} if
     * none; made if missing), and an environment of {@code PATH}, {@code HOME} (the user's home
     * directory from {@code /etc/passwd}, else {@code /root} for root and {@code /} for others) and
     * {@code LANG=C.UTF-8} overridden by its {@code Env}. Its {@code Entrypoint} and {@code Cmd}
     * are not run: a sandbox runs its own init, and the commands it is given. {@link #user}, {@link
     * #workingDirectory} and {@link #env} override the image's. A sandbox keeps its user, working
     * directory and environment for its life, also when attached to from another process, forked,
     * stopped, hibernated or saved as a snapshot (whose sandboxes run the same way).
     *
     * <p>An image needs no program of its own for what the engine does itself: files, creating the
     * working directory, running a program given as {@code Command.argv(...)} (looked up on {@code
     * PATH}). Shell commands need {@code /bin/sh}, the {@linkplain LocalSandbox#shell shell} {@code
     * /bin/bash} or {@code /bin/sh}, {@link Isolation#GVISOR} {@code /bin/sh}; where a program is
     * missing, the error names it and the image.
     */
    public Builder image(String image) {
      this.image = Objects.requireNonNull(image, "image");
      this.imageSet = true;
      return this;
    }

    /**
     * The absolute directory commands start in and relative paths resolve against (default: the
     * sandbox's own, which is {@code /home/sandbox} for Sandbox4j's own images and the image
     * config's {@code WorkingDir}, else {@code /}, for an image from elsewhere: see {@link
     * #image}). Created in a new sandbox and given to its user; must exist in one attached to.
     */
    public Builder workingDirectory(String path) {
      this.workingDirectory = SettingChecks.workingDirectory(path);
      return this;
    }

    /**
     * Who a new sandbox's commands and file operations run as, instead of its image's user (see
     * {@link #image}): {@code UID}, {@code NAME}, {@code UID:GID} or {@code NAME:GROUP}. A number
     * is taken as it is (0 to 65535, the ids a sandbox maps); a name is looked up in the image's
     * {@code /etc/passwd} or {@code /etc/group} when the sandbox is created, which fails naming it
     * if the image has no such user or group. Without a group, the user's primary group from {@code
     * /etc/passwd}, else 0. {@code HOME} becomes the user's home directory. The sandbox keeps its
     * user for its life; a provider that attaches to it uses the sandbox's.
     *
     * <p>Files are read and written from the host with the file system ids of that user in the
     * sandbox's own block of host ids. For root (uid 0) that is the owner of the sandbox's system
     * files, but without the capabilities a root process inside has: a file of another user that
     * root could read or change inside only because of those capabilities is refused to the files
     * API (commands run as root inside are not limited so).
     *
     * @throws IllegalArgumentException if {@code user} is not of that form, or an id is out of
     *     range
     */
    public Builder user(String user) {
      this.user = SettingChecks.user(user);
      return this;
    }

    /**
     * A variable every command gets, over the sandbox's own environment (for an image from
     * elsewhere, its config's {@code Env}; see {@link #image}); a command's own env wins.
     */
    public Builder env(String name, String value) {
      SettingChecks.env(name, value);
      env.put(name, value);
      return this;
    }

    /** Variables every command gets. */
    public Builder env(Map<String, String> vars) {
      vars.forEach(this::env);
      return this;
    }

    /** CPU quota of a new sandbox: 1, 2, 4 or 8 CPUs (default 1). */
    public Builder cpus(int cpus) {
      this.cpus = SettingChecks.cpus(cpus);
      sizeSettings.add("cpus");
      return this;
    }

    /**
     * Memory limit of a new sandbox in bytes (default 4 GiB per CPU; at least 64 MiB, at most 1
     * TiB).
     */
    public Builder memory(long bytes) {
      this.memoryBytes = SettingChecks.memory(bytes);
      sizeSettings.add("memory");
      return this;
    }

    /**
     * Limit on processes (threads included) of a new sandbox: at least 16, at most 4194304; by
     * default an eighth of what all sandboxes of the host may use together (half of the host's
     * {@code pid_max}), from 256 to 4096: 2048 where {@code pid_max} is 32768. Whatever each
     * sandbox's limit, all of them together never exceed that half.
     */
    public Builder pids(int pids) {
      this.pids = SettingChecks.pids(pids);
      sizeSettings.add("pids");
      return this;
    }

    /**
     * Byte quota of a new sandbox's writable layer (default 10 GiB; at least 64 MiB, at most 16
     * TiB): the files it writes over its image live on a file system of their own this large, and a
     * write past it fails inside with ENOSPC ("No space left on device"), leaving the host and
     * other sandboxes unaffected. A fork gets its parent's quota; a sandbox from a snapshot gets
     * the snapshot's unless this is set.
     */
    public Builder disk(long bytes) {
      new SandboxDisk.Limit(bytes, SandboxDisk.DEFAULT_INODES); // validates, naming the setting
      this.diskBytes = bytes;
      return this;
    }

    /**
     * Inode quota of a new sandbox's writable layer: how many files, directories and links it can
     * create (default 1,000,000; at least 1024, at most 2^31). Past it, creating one fails with
     * ENOSPC.
     */
    public Builder diskInodes(long inodes) {
      new SandboxDisk.Limit(SandboxDisk.DEFAULT_BYTES, inodes); // validates, naming the setting
      this.diskInodes = inodes;
      return this;
    }

    /**
     * Free space the host keeps: a create (or fork) is refused with {@link
     * InsufficientDiskException} when the state directory's file system has less free (default 5%
     * of that file system, at least 1 GiB, at most 20 GiB). Sandboxes' disks are sparse: they take
     * host space as they are written, up to their quota.
     */
    public Builder diskReserve(long bytes) {
      this.diskReserve = SettingChecks.diskReserve(bytes);
      return this;
    }

    /**
     * How far the disks of the state directory's sandboxes may promise its file system's free space
     * above the reserve ({@link #diskReserve}): a create or fork is refused with {@link
     * InsufficientDiskException} when the new disk's size plus what every existing disk may still
     * write (its size minus what it holds) is more than {@code factor} times that space. Default 4.
     * At 1 no sandbox's writes, nor all of them together, can take the file system below the
     * reserve (other processes' writes aside); above 1 more sandboxes fit (most never fill their
     * disk) and their writes together can take up to {@code factor} times that space, so the host
     * can fill up if many fill their disks. {@link Double#POSITIVE_INFINITY}: no bound (the reserve
     * then only refuses creates). Sandboxes made before disks existed have no disk and no bound.
     */
    public Builder diskOvercommit(double factor) {
      new SandboxDisk.Budget(0, factor); // validates, naming the setting
      this.diskOvercommit = factor;
      return this;
    }

    /** A label of a new sandbox, shown by {@link LocalSandbox#list()}. */
    public Builder label(String key, String value) {
      SettingChecks.label(key, value);
      labels.put(key, value);
      return this;
    }

    /**
     * Where a new sandbox may connect to (default {@link EgressPolicy#all()}: the public internet,
     * nothing private, not the host, not other sandboxes). Change it later with {@link
     * LocalSandbox#setEgress}.
     */
    public Builder egress(EgressPolicy policy) {
      this.egress = Objects.requireNonNull(policy, "egress");
      return this;
    }

    /**
     * Puts a new sandbox on named network {@code name} (1 to 32 of a-z, 0-9, '-'): the sandboxes on
     * it reach each other, by id as host name. Without any, a sandbox is on no network (isolated).
     * A provider built with a network may also attach to ({@link LocalSandbox#backend}) and fork
     * sandboxes on it; one built without refuses them. May be called for several networks.
     */
    public Builder network(String name) {
      networks.add(Networks.checkNetworkName(name));
      return this;
    }

    /**
     * The user and password (or access token) for registry {@code host} ({@code docker.io}, {@code
     * ghcr.io}, {@code localhost:5000}: the host of an image reference), used for pulls instead of
     * those of the docker CLI's configuration.
     */
    public Builder registryAuth(String host, String username, String password) {
      Objects.requireNonNull(host, "host");
      Objects.requireNonNull(username, "username");
      Objects.requireNonNull(password, "password");
      if (host.isBlank() || host.contains("/") || username.isEmpty()) {
        throw new IllegalArgumentException(
            "registryAuth needs a registry host (no scheme or path) and a user name");
      }
      registryCredentials.put(
          host.toLowerCase(java.util.Locale.ROOT),
          new RegistryCredentials.Credentials(
              username, password, null, "LocalSandbox.Builder.registryAuth"));
      return this;
    }

    /**
     * Speaks plain HTTP to registry {@code host} ({@code host:port}) instead of HTTPS, as docker's
     * {@code insecure-registries} does: for a registry on a trusted network only. Loopback hosts
     * get HTTP without this.
     */
    public Builder plainHttpRegistry(String host) {
      Objects.requireNonNull(host, "host");
      if (host.isBlank() || host.contains("/")) {
        throw new IllegalArgumentException("plainHttpRegistry needs HOST[:PORT]: " + host);
      }
      plainHttpRegistries.add(host.toLowerCase(java.util.Locale.ROOT));
      return this;
    }

    /**
     * The most an image pulled from a registry may hold: its layers as downloaded (compressed, the
     * sizes its manifest gives) and as extracted (each layer's file sizes, read before it is
     * extracted), each at most {@code bytes}. A larger image is refused with {@link
     * ImageTooLargeException} and nothing of it is kept. Default: no bound (an image is then not
     * read before it is extracted). A registry serves any image its clients ask for, and a layer of
     * a few KiB can expand to terabytes: a server whose tenants pick images sets this ({@code
     * sandbox4j serve --max-image-size}). Whatever this is, a pull never takes the disk below
     * {@link #diskReserve} ({@link InsufficientDiskException}).
     */
    public Builder maxImageSize(long bytes) {
      if (bytes <= 0) {
        throw new IllegalArgumentException("maxImageSize must be positive, was " + bytes);
      }
      this.maxImageSize = bytes;
      return this;
    }

    /** Receives progress lines of long work (building the default image, pulling images). */
    public Builder progress(Consumer<String> progress) {
      this.progress = Objects.requireNonNull(progress, "progress");
      return this;
    }

    /**
     * A new sandbox starts from snapshot {@code name} ({@link LocalSandbox#snapshot}) instead of an
     * image, with the size the snapshot was saved with: {@code cpus}, {@code memory}, {@code pids}
     * and {@code image} cannot be combined with it. It runs as the saved sandbox ran (its user,
     * working directory and environment; see {@link #image}) unless {@link #user}, {@link
     * #workingDirectory} or {@link #env} say otherwise. A snapshot that does not exist, or is still
     * being saved (it exists once {@link LocalSandbox#snapshot} has returned), makes the first use
     * fail with {@link WorkspaceUnavailableException}, whose message says which; nothing waits for
     * a save.
     */
    public Builder snapshot(String name) {
      LocalRefs.checkImageName(name, "snapshot name");
      this.snapshot = name;
      return this;
    }

    /**
     * How long a command may print nothing (neither stdout nor stderr) before it is killed with
     * {@link dev.sandbox4j.workspace.WorkspaceTimeoutException}, with or without a timeout of its
     * own (default 30 minutes).
     */
    public Builder noOutputTimeout(Duration limit) {
      this.noOutputTimeout = SettingChecks.noOutputTimeout(limit);
      return this;
    }

    /**
     * How long a new sandbox may be idle before it is suspended (boxd's {@code
     * auto_suspend_timeout}); zero, the default, never suspends it. Idle means: no command the
     * engine started is running, no command or file operation started or ended within that time,
     * and its processes used less than 0.1 CPU (so CPU-bound work left in the background is not
     * suspended). Any operation wakes it. Traffic through its port URLs and TCP forwards counts as
     * activity too, and a request wakes it.
     */
    public Builder autoSuspendTimeout(Duration idle) {
      this.autoSuspendTimeout = SettingChecks.nonNegative(idle, "autoSuspendTimeout");
      return this;
    }

    /**
     * The total lifetime of a new sandbox, from its creation (Modal's {@code sandbox_timeout}): 10
     * seconds to 24 hours, default 24 hours. Then it is destroyed, whatever it is doing, and using
     * it raises {@link WorkspaceUnavailableException} saying so.
     */
    public Builder sandboxTimeout(Duration lifetime) {
      this.sandboxTimeout = SettingChecks.sandboxTimeout(lifetime);
      return this;
    }

    /**
     * How long a new sandbox may be idle (as for {@link #autoSuspendTimeout}) before it is
     * destroyed (Modal's {@code idle_timeout}); zero, the default, never. A suspended or stopped
     * sandbox is idle.
     */
    public Builder idleTimeout(Duration idle) {
      this.idleTimeout = SettingChecks.nonNegative(idle, "idleTimeout");
      return this;
    }

    /**
     * A point in time at which a new sandbox is destroyed, or null (the default) for none. A point
     * already past destroys it right after creation.
     */
    public Builder deleteAfter(java.time.Instant when) {
      this.deleteAfter = when;
      return this;
    }

    /**
     * Whether a new sandbox's port URLs need an access token (default false: any local process can
     * open them). The token is random, kept in the state directory (root only, never in the
     * sandbox) and read with {@link LocalSandbox#portToken}; a fork gets a token of its own.
     */
    public Builder portToken(boolean required) {
      this.portToken = required;
      return this;
    }

    /**
     * Keeps {@code size} sandboxes of this shape created ahead of need (default 0: none), so that a
     * new backend's first operation only finishes a create: about a command's time instead of a
     * whole create. A claimed sandbox is a new one in every respect: an id never shown before, this
     * builder's labels, its timers counted from the claim, the same image, limits, egress policy,
     * networks and isolation, and nothing run in it but its init. The pool refills in the
     * background, one create at a time, within the same host limits as any create; when it is
     * empty, a backend creates its sandbox as without a pool. Members use memory and count against
     * the host's limits while they wait; {@link LocalSandbox#close} destroys them.
     *
     * @throws IllegalArgumentException if {@code size} is negative or above 64
     */
    public Builder warmPool(int size) {
      if (size < 0 || size > MAX_WARM_POOL) {
        throw new IllegalArgumentException(
            "warmPool must be between 0 and " + MAX_WARM_POOL + ", not " + size);
      }
      this.warmPool = size;
      return this;
    }

    /**
     * Takes new sandboxes from {@code owner}'s warm pool ({@link #warmPool}) whenever this builder
     * makes the same sandboxes as {@code owner} but for labels, timers and env (home, runtime,
     * image or snapshot, user, size, working directory, egress policy, networks, isolation and port
     * token equal): a claimed sandbox gets this builder's labels and timers, and its commands this
     * builder's env. One pool then serves many label sets, a server's tenants say. Where the shape
     * differs, or {@code owner} has no pool, a backend creates its sandbox afresh.
     */
    public Builder warmPoolOf(LocalSandbox owner) {
      this.poolOwner = Objects.requireNonNull(owner, "owner");
      return this;
    }

    /**
     * Returns the provider; with a warm pool, its thread starts creating sandboxes now.
     *
     * @throws IllegalArgumentException if a snapshot is combined with a size or an image
     */
    public LocalSandbox build() {
      SettingChecks.snapshotAlone(snapshot, sizeSettings, imageSet);
      LocalSandbox built = new LocalSandbox(this);
      built.warmPool().ifPresent(WarmPool::start);
      return built;
    }
  }
}
