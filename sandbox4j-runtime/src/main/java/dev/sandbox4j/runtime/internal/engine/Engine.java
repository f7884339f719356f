package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.linux.HostLimits;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.Gvisor;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * The sandboxes of one state directory: creating, attaching, destroying and collecting garbage.
 * Thread-safe, and safe across JVMs: state lives on disk, written atomically, and changes of one
 * sandbox's life hold its lock ({@code sandboxes/<id>/lock}).
 *
 * <p>Layout of {@code sandboxes/<id>/}: {@code state.json}, {@code lock}, {@code
 * bundle/config.json} (the OCI spec), {@code disk.img} mounted at {@code disk/} with {@code
 * disk/upper/} and {@code disk/work/} (the private overlay layer on a file system of its own, see
 * {@link SandboxDisk}; {@code upper/} and {@code work/} in the directory itself for a sandbox made
 * before disks existed or an image build's step), {@code rootfs/} (the overlay mount, the
 * container's root).
 *
 * <p>Its parts, in this package: {@link Reservation} (a new sandbox's id, directory, record and
 * lock), {@link ContainerStart} (mount, bundle, run, network) and {@link SandboxGc}.
 */
public final class Engine {
  public static final String USER = "1000:1000";
  public static final String HOME = "/home/sandbox";
  public static final Map<String, String> BASE_ENV =
      Map.of(
          "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "HOME", HOME,
          "USER", "sandbox",
          "LANG", "C.UTF-8");
  private static final String ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final System.Logger LOG = System.getLogger(Engine.class.getName());

  private final Path home;
  private final Path sandboxes;
  private final ImageStore images;
  private final OciRuntime runtime;
  private final Cgroups cgroups;
  private final Networks networks;
  private final ContainerStart containers;
  private volatile long diskReserve = -1; // -1: SandboxDisk.defaultReserve, computed on first use
  private volatile double diskOvercommit = SandboxDisk.DEFAULT_OVERCOMMIT;

  /**
   * The image store of {@code home}, which keeps every layer a sandbox of the home runs on (read
   * from their records).
   */
  public static ImageStore imageStore(Path home) {
    Path sandboxesDir = home.resolve("sandboxes");
    return new ImageStore(home.resolve("images"), () -> SandboxRecord.layersInUse(sandboxesDir));
  }

  /**
   * The engine of state directory {@code home}: an existing home made before its modes were tight
   * is tightened first (only a create makes a missing one); {@code runtimeName} names the OCI
   * runtime (null: the default crun); {@code limits} bounds all the home's sandboxes together
   * (null: derived from the host); {@code diskReserve} is the free space a create leaves (negative:
   * the default).
   */
  public static Engine open(
      Path home,
      ImageStore images,
      String runtimeName,
      HostLimits.Sandboxes limits,
      long diskReserve,
      double diskOvercommit) {
    try {
      if (Files.isDirectory(home)) {
        StateDirectory.ensure(home);
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot make the state directory " + home + ": " + e, e);
    }
    String name = runtimeName == null ? "crun" : runtimeName;
    Path binary =
        (runtimeName == null ? OciRuntime.defaultCrun() : OciRuntime.find(runtimeName))
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        "the OCI runtime '"
                            + name
                            + "' is not installed: run `sandbox4j setup` (or apt-get install "
                            + name
                            + ")"));
    Cgroups cgroups = Cgroups.detect(Cgroups.parentFor(home));
    Engine e =
        new Engine(
            home,
            images,
            new OciRuntime(binary, home.resolve("run").resolve(binary.getFileName().toString())),
            limits == null ? cgroups : cgroups.withLimits(limits));
    if (diskReserve >= 0) {
      e.diskReserve(diskReserve);
    }
    e.diskOvercommit(diskOvercommit);
    return e;
  }

  public Engine(Path home, ImageStore images, OciRuntime runtime, Cgroups cgroups) {
    this.home = home;
    this.sandboxes = home.resolve("sandboxes");
    this.images = images;
    this.runtime = runtime;
    this.cgroups = cgroups;
    this.networks = new Networks(home);
    this.containers = new ContainerStart(this);
  }

  public Networks networks() {
    return networks;
  }

  /** The free space a create leaves the home's file system at least ({@link SandboxDisk}). */
  public void diskReserve(long bytes) {
    this.diskReserve = bytes;
  }

  /** How far the home's disks may overcommit its free space ({@link SandboxDisk.Budget}). */
  public void diskOvercommit(double factor) {
    this.diskOvercommit = new SandboxDisk.Budget(0, factor).overcommit();
  }

  public double diskOvercommit() {
    return diskOvercommit;
  }

  public long diskReserve() {
    long r = diskReserve;
    if (r < 0) {
      r = SandboxDisk.defaultReserve(home);
      diskReserve = r;
    }
    return r;
  }

  public Path home() {
    return home;
  }

  public ImageStore images() {
    return images;
  }

  /** The runtime of container sandboxes: crun, or the one the engine was opened with. */
  public OciRuntime runtime() {
    return runtime;
  }

  /**
   * The runtime of sandboxes with {@code isolation}: {@link #runtime()} for containers, gVisor's
   * {@code runsc} (state in {@code run/runsc}) for {@link Isolation#GVISOR}.
   *
   * @throws WorkspaceException if gVisor is asked for and not installed
   */
  public OciRuntime runtime(Isolation isolation) {
    if (isolation != Isolation.GVISOR) {
      return runtime;
    }
    OciRuntime g = gvisor;
    if (g == null) {
      Optional<String> why = Gvisor.unavailable();
      if (why.isPresent()) {
        throw new WorkspaceException(why.get() + "; or choose Isolation.CONTAINER");
      }
      Path binary = Gvisor.find().orElseThrow();
      g = new OciRuntime(binary, home.resolve("run").resolve("runsc"));
      gvisor = g;
    }
    return g;
  }

  private volatile OciRuntime gvisor;

  /** The runtime of sandbox {@code id}, as its record says ({@link #isolationOf}). */
  public OciRuntime runtimeOf(String id) {
    return runtime(isolationOf(id));
  }

  /**
   * The isolation of sandbox {@code id}, from its record (read once: it never changes).
   *
   * @throws WorkspaceUnavailableException if it does not exist
   */
  public Isolation isolationOf(String id) {
    Isolation known = isolations.get(id);
    if (known != null) {
      return known;
    }
    Isolation read = record(id).isolation();
    isolations.put(id, read);
    return read;
  }

  private final Map<String, Isolation> isolations = new java.util.concurrent.ConcurrentHashMap<>();

  // ---- exec helpers -----------------------------------------------------------------------

  /**
   * Whether commands go through each sandbox's {@link ExecHelper} (the default) or each through a
   * {@code crun exec} of its own: {@code -Dsandbox4j.fastExec=false} or {@code
   * SANDBOX4J_FAST_EXEC=false} turns it off. Both give the same guarantees.
   */
  static boolean fastExec() {
    return !"false"
        .equals(System.getProperty("sandbox4j.fastExec", System.getenv("SANDBOX4J_FAST_EXEC")));
  }

  /** The running helper of each sandbox that has one. Guarded per sandbox by its helperLocks. */
  private final Map<String, ExecHelper> helpers = new java.util.concurrent.ConcurrentHashMap<>();

  private final Map<String, Object> helperLocks = new java.util.concurrent.ConcurrentHashMap<>();

  /** Sandboxes whose helper cannot start (created before the host had one): told once each. */
  private final java.util.Set<String> withoutHelper =
      java.util.concurrent.ConcurrentHashMap.newKeySet();

  private static final java.util.concurrent.atomic.AtomicBoolean TOLD_NO_HELPER =
      new java.util.concurrent.atomic.AtomicBoolean();

  /**
   * The exec helper of running sandbox {@code id} (a crun one), started if it has none or its
   * helper is gone; null where commands take the {@code crun exec} path: fast exec off, the host
   * has no helper ({@code sandbox4j setup} installs it; said once in the log), or the sandbox
   * cannot run it (said once per sandbox).
   *
   * @throws WorkspaceException if the sandbox is at its process limit (the helper could not start)
   */
  ExecHelper execHelper(String id) {
    if (!fastExec()) {
      return null;
    }
    if (!ExecHelper.supported()) {
      if (TOLD_NO_HELPER.compareAndSet(false, true)) {
        LOG.log(
            System.Logger.Level.WARNING,
            "the exec helper "
                + dev.sandbox4j.runtime.internal.oci.OciConfig.HOST_EXEC_HELPER
                + " is not installed (or native access is off): every command runs through its own"
                + " crun exec, which is slower (same guarantees). Run `sandbox4j setup`");
      }
      return null;
    }
    if (withoutHelper.contains(id)) {
      return null;
    }
    ExecHelper running = helpers.get(id);
    if (running != null && running.lost() == null && cgroups.isCommandRunning(id, running.group)) {
      return running;
    }
    synchronized (helperLocks.computeIfAbsent(id, k -> new Object())) {
      running = helpers.get(id);
      if (running != null) {
        if (running.lost() == null && cgroups.isCommandRunning(id, running.group)) {
          return running;
        }
        helpers.remove(id);
        running.close();
      }
      try {
        ExecHelper started = ExecHelper.start(this, id, Exec.joining(this, id));
        started.awaitReady(10_000);
        helpers.put(id, started);
        return started;
      } catch (ExecHelper.NotStarted e) {
        if (cgroups.pidsHeadroom(id) < Exec.PIDS_TO_START
            || e.said.contains("Resource temporarily unavailable")) {
          throw Exec.atProcessLimit(id);
        }
        withoutHelper.add(id);
        LOG.log(
            System.Logger.Level.WARNING,
            "sandbox local:"
                + id
                + " cannot run the exec helper ("
                + e.getMessage()
                + "; a sandbox created before `sandbox4j setup` installed it has none): its"
                + " commands run through crun exec, slower, same guarantees");
        return null;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.util.concurrent.CancellationException(
            "interrupted while starting the exec helper; no command ran");
      } catch (IOException e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "cannot start the exec helper of sandbox local:"
                + id
                + ": "
                + e.getMessage()
                + "; this command runs through crun exec");
        return null;
      }
    }
  }

  /** The running helper of each gVisor sandbox that has one. Guarded per sandbox by helperLocks. */
  private final Map<String, GvisorHelper> gvisorHelpers =
      new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * The exec helper of running gVisor sandbox {@code id}, started if it has none or its helper is
   * gone; null where its commands take the {@code runsc exec} path: fast exec off, the host has no
   * helper, or the sandbox cannot run it (created before the host had the framed helper: said once
   * per sandbox).
   */
  GvisorHelper gvisorHelper(String id) {
    if (!fastExec() || !dev.sandbox4j.runtime.internal.oci.OciConfig.hasExecHelper()) {
      return null;
    }
    if (withoutHelper.contains(id)) {
      return null;
    }
    GvisorHelper running = gvisorHelpers.get(id);
    if (running != null && running.serving()) {
      return running;
    }
    synchronized (helperLocks.computeIfAbsent(id, k -> new Object())) {
      running = gvisorHelpers.get(id);
      if (running != null) {
        if (running.serving()) {
          return running;
        }
        gvisorHelpers.remove(id);
        running.close();
      }
      try {
        GvisorHelper started = GvisorHelper.start(this, id);
        gvisorHelpers.put(id, started);
        return started;
      } catch (GvisorHelper.NotStarted e) {
        withoutHelper.add(id);
        LOG.log(
            System.Logger.Level.WARNING,
            "gVisor sandbox local:"
                + id
                + " cannot run the exec helper ("
                + e.getMessage()
                + "; a sandbox created before `sandbox4j setup` installed it has none): its"
                + " commands run through runsc exec, slower, same guarantees");
        return null;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.util.concurrent.CancellationException(
            "interrupted while starting the exec helper; no command ran");
      } catch (IOException e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "cannot start the exec helper of gVisor sandbox local:"
                + id
                + ": "
                + e.getMessage()
                + "; this command runs through runsc exec");
        return null;
      }
    }
  }

  /** The host pid of sandbox {@code id}'s exec helper, if it has one running. */
  Optional<Long> execHelperPid(String id) {
    ExecHelper h = helpers.get(id);
    return h == null || h.lost() != null ? Optional.empty() : h.hostPid();
  }

  /**
   * Starts sandbox {@code id}'s exec helper now rather than with its first command, where commands
   * use one ({@link #execHelper}): a warm pool's member has it ready when it is claimed. A helper
   * that cannot start is the first command's business, as without this call.
   */
  public void prepareExec(String id) {
    try {
      if (isolationOf(id) == Isolation.GVISOR) {
        gvisorHelper(id);
      } else {
        execHelper(id);
      }
    } catch (RuntimeException e) {
      LOG.log(
          System.Logger.Level.DEBUG,
          "the exec helper of local:" + id + " did not start ahead: " + e.getMessage());
    }
  }

  /**
   * Ends sandbox {@code id}'s exec helper, if it has one, and waits until it is gone: before its
   * processes are checkpointed (a dump must not carry it, and a restored or forked sandbox starts a
   * helper of its own on its next command), when its container stops or goes, and when another
   * engine takes the sandbox over (a warm pool's member claimed by another provider, which starts a
   * helper of its own).
   */
  public void stopExecHelper(String id) {
    Object lock = helperLocks.computeIfAbsent(id, k -> new Object());
    synchronized (lock) {
      ExecHelper h = helpers.remove(id);
      if (h != null) {
        h.close();
      }
      GvisorHelper g = gvisorHelpers.remove(id);
      if (g != null) {
        g.close();
      }
      withoutHelper.remove(id);
    }
  }

  /** The runtimes whose containers this engine may have: for gc and the supervisor. */
  public List<OciRuntime> runtimes() {
    List<OciRuntime> all = new java.util.ArrayList<>(List.of(runtime));
    if (Gvisor.unavailable().isEmpty()) {
      all.add(runtime(Isolation.GVISOR));
    }
    return all;
  }

  public Cgroups cgroups() {
    return cgroups;
  }

  /**
   * Where {@code crun exec} writes the pid of command {@code group} of sandbox {@code id} once the
   * command is set up inside (see {@link Exec}): in the sandbox's directory, which its destroy
   * removes.
   */
  Path commandPidFile(String id, String group) {
    return sandboxes.resolve(id).resolve(group + ".pid");
  }

  /**
   * What a new sandbox is made of. {@code layers}, if not null, are the image layer ids (bottom
   * first) to run on instead of {@code image}'s: a recipe step's sandbox, named after the image
   * being built. {@code network}, if not null, gives the sandbox a network namespace of its own
   * with a way out ({@link Networks}); without, it has loopback only (an image build's step).
   * {@code disk}, if not null, puts its writable layer on a disk of its own with that quota ({@link
   * SandboxDisk}); without, the layer is a directory of the host's file system (an image build's
   * step, whose layer is moved into the image store). {@code isolation} (null: {@link
   * Isolation#CONTAINER}) is the runtime its container runs under for its whole life.
   *
   * <p>{@code workingDirectory}, if not null, is made in the new sandbox and given to its user,
   * unless it is its identity's own; null: its identity's, made if missing. {@code identity}, if
   * not null, is the new sandbox's as it is (a fork's, its parent's; a snapshot's, the one it was
   * saved with); null: its image's ({@link SandboxIdentity}: an image with an origin runs as its
   * config says, Sandbox4j's own as the seeds do). {@code user}, if not null, is who it runs as
   * instead ({@code uid[:gid]} or {@code name[:group]}, resolved against its image's {@code
   * /etc/passwd} and {@code /etc/group}).
   */
  public record Spec(
      String image,
      String workingDirectory,
      OciConfig.Limits limits,
      Map<String, String> labels,
      List<String> layers,
      Networks.Settings network,
      SandboxDisk.Limit disk,
      Isolation isolation,
      String user,
      SandboxIdentity identity) {
    public Spec {
      isolation = isolation == null ? Isolation.CONTAINER : isolation;
    }

    /** A sandbox that runs as its image says ({@link SandboxIdentity}). */
    public Spec(
        String image,
        String workingDirectory,
        OciConfig.Limits limits,
        Map<String, String> labels,
        List<String> layers,
        Networks.Settings network,
        SandboxDisk.Limit disk,
        Isolation isolation) {
      this(image, workingDirectory, limits, labels, layers, network, disk, isolation, null, null);
    }

    /** A container sandbox ({@link Isolation#CONTAINER}). */
    public Spec(
        String image,
        String workingDirectory,
        OciConfig.Limits limits,
        Map<String, String> labels,
        List<String> layers,
        Networks.Settings network,
        SandboxDisk.Limit disk) {
      this(image, workingDirectory, limits, labels, layers, network, disk, Isolation.CONTAINER);
    }

    Spec(
        String image,
        String workingDirectory,
        OciConfig.Limits limits,
        Map<String, String> labels,
        List<String> layers,
        Networks.Settings network) {
      this(image, workingDirectory, limits, labels, layers, network, null, Isolation.CONTAINER);
    }

    Spec(
        String image,
        String workingDirectory,
        OciConfig.Limits limits,
        Map<String, String> labels) {
      this(image, workingDirectory, limits, labels, null, null);
    }

    Spec(
        String image,
        String workingDirectory,
        OciConfig.Limits limits,
        Map<String, String> labels,
        List<String> layers) {
      this(image, workingDirectory, limits, labels, layers, null);
    }
  }

  // ---- create -----------------------------------------------------------------------------

  /** Creates and starts a sandbox; returns its id. On failure nothing is left behind. */
  public String create(Spec spec, Consumer<String> progress) {
    return create(spec, progress, Engine::prepareUpperLayer);
  }

  /** Makes a new sandbox's {@code upper/}, {@code work/} and {@code rootfs/} in {@code dir}. */
  public interface UpperLayer {
    void prepare(Path dir, String id) throws IOException;

    /** Starts the new sandbox's container: afresh, unless (a live fork) from a checkpoint. */
    default void start(Engine engine, Path dir, String id, Image image, OciConfig.Limits limits)
        throws IOException {
      engine.start(dir, id, image, limits);
    }
  }

  /** {@link #create(Spec, Consumer)} with the writable layer {@code upper} makes (for a fork). */
  public String create(Spec spec, Consumer<String> progress, UpperLayer upper) {
    return commit(park(spec, progress, upper), spec.labels(), dir -> {});
  }

  /**
   * A sandbox created up to its one durable step, and held there: its container runs, but its
   * record still says {@code CREATING}, the file {@link #PARKED} marks it and its lock stays held.
   * So no one can attach to it, {@link #list} leaves it out, and if this JVM dies with it parked,
   * its lock dies too and {@code gc} removes it as an interrupted create. {@link #commit} finishes
   * the create; {@link #discard} tears it down. A warm pool's member is one. Its lock belongs to
   * this JVM, so any thread may commit or discard it.
   */
  public static final class Parked {
    private final String id;
    private final SandboxRecord record;
    private final FileLock lock;
    private final List<String> networks;

    private Parked(String id, SandboxRecord record, FileLock lock, List<String> networks) {
      this.id = id;
      this.record = record;
      this.lock = lock;
      this.networks = networks;
    }

    public String id() {
      return id;
    }

    /** Its record as parked: image layers, limits, isolation; status {@code CREATING}. */
    public SandboxRecord record() {
      return record;
    }
  }

  /**
   * The file in a {@linkplain Parked parked} sandbox's directory that says it is one (the
   * supervisor watches for it going: a claimed sandbox is someone's from then on).
   */
  public static final String PARKED = "parked";

  /** What finishes a parked sandbox's create before its record is written: its timers, say. */
  public interface Finish {
    void prepare(Path dir) throws IOException;
  }

  /**
   * Creates sandbox up to its one durable step ({@link Parked}). On failure nothing is left behind.
   */
  public Parked park(Spec spec, Consumer<String> progress, UpperLayer upper) {
    SandboxDisk.checkReserve(home, diskReserve());
    try {
      // before the image: a default-image build in a home no sandbox can use is wasted (and
      // leaves its mounts behind if interrupted)
      StateDirectory.requireReachable(home);
    } catch (IOException e) {
      throw new WorkspaceException("cannot create a sandbox: " + e.getMessage(), e);
    }
    Image image = image(spec, progress);
    Reservation reserved = Reservation.reserve(home, image, spec);
    String id = reserved.id();
    Path dir = sandboxes.resolve(id);
    try {
      Files.write(dir.resolve(PARKED), new byte[0]);
      isolations.put(id, spec.isolation()); // what its commands ask while record() denies it
      // Its record names the image's layers: once the store has seen them all still there, no
      // image removal, rebuild or gc deletes them.
      images.checkLayersKept(image);
      if (spec.network() != null) {
        networks.assign(dir, id, spec.network());
        networks.writeHosts(dir, id);
      }
      if (spec.disk() != null) {
        SandboxDisk.create(
            home, dir, spec.disk(), new SandboxDisk.Budget(diskReserve(), diskOvercommit));
      }
      upper.prepare(dir, id);
      upper.start(this, dir, id, image, spec.limits());
      // Known only now that its root is mounted (a name is looked up in its /etc/passwd). Kept
      // by the RUNNING record that commit writes; nothing reads it from the CREATING one.
      SandboxIdentity identity = identity(dir, image, spec);
      SandboxRecord record = reserved.record().withIdentity(identity);
      String workingDirectory = spec.workingDirectory();
      if (workingDirectory != null && !workingDirectory.equals(identity.workingDirectory())) {
        createWorkingDirectory(id, record, workingDirectory, true);
      } else if (spec.identity() == null && !identity.workingDirectory().equals(HOME)) {
        // the image's WorkingDir: docker makes it if missing, and so does this
        createWorkingDirectory(id, record, identity.workingDirectory(), false);
      }
      if (spec.network() != null && spec.network().egress().interceptTls()) {
        installCaIfIntercepting(id);
      }
      // Its name in sandboxes/ made durable here, which reserve did not, and not in commit: a
      // warm pool's claim waits for one fsync fewer. A power loss before the commit leaves a
      // CREATING record, which gc removes.
      AtomicFiles.syncDirectory(sandboxes);
      return new Parked(
          id,
          record,
          reserved.lock(),
          spec.network() == null ? List.of() : List.copyOf(spec.network().networks()));
    } catch (IOException | RuntimeException e) {
      throw failedCreate(id, reserved.lock(), e);
    }
  }

  /**
   * Finishes the create of {@code parked}: {@code finish} first, then its {@code RUNNING} record,
   * created now and labelled {@code labels}, written durably. Returns its id. On failure nothing is
   * left behind.
   */
  public String commit(Parked parked, Map<String, String> labels, Finish finish) {
    String id = parked.id;
    Path dir = sandboxes.resolve(id);
    try {
      finish.prepare(dir);
      // Unmarked first: a crash from here on leaves a CREATING record that no one holds, which gc
      // removes; once the record says RUNNING, it is a sandbox like any other.
      Files.delete(dir.resolve(PARKED));
      // The one durable step of a create: from here on the sandbox survives a power loss (its
      // name in sandboxes/ was synced by park).
      parked.record.running(Instant.now(), labels).write(dir.resolve("state.json"));
      for (String network : parked.networks) {
        networks.refreshHosts(network, null); // its peers learn its name
      }
      parked.lock.close();
    } catch (IOException | RuntimeException e) {
      throw failedCreate(id, parked.lock, e);
    }
    LOG.log(System.Logger.Level.INFO, "Created local sandbox {0}", id);
    return id;
  }

  /** Tears a {@linkplain Parked parked} sandbox down, never to be used. */
  public void discard(Parked parked) {
    RuntimeException failed = tearDown(parked.id, parked.lock);
    if (failed != null) {
      throw failed;
    }
  }

  /**
   * The exception for a create of sandbox {@code id} that failed with {@code e}, once the sandbox
   * is torn down (a failure of that added to it).
   */
  private WorkspaceException failedCreate(String id, FileLock lock, Exception e) {
    RuntimeException cleanup = tearDown(id, lock);
    if (cleanup != null) {
      e.addSuppressed(cleanup);
    }
    if (e instanceof WorkspaceException w) {
      return w;
    }
    return new WorkspaceException("cannot create a sandbox: " + e.getMessage(), e);
  }

  /**
   * Releases the lock of a sandbox being created, then destroys it; returns what failed, if
   * anything.
   */
  private RuntimeException tearDown(String id, FileLock lock) {
    try {
      lock.close();
      destroy(id);
      return null;
    } catch (IOException e) {
      return new WorkspaceException("cannot destroy local:" + id + ": " + e, e);
    } catch (RuntimeException e) {
      return e;
    }
  }

  private Image image(Spec spec, Consumer<String> progress) {
    String name = spec.image();
    if (spec.layers() != null) {
      return images.ofLayers(name, spec.layers());
    }
    if (name.equals(ImageStore.DEFAULT)) {
      return images.ensureDefault(progress);
    }
    return images
        .find(name)
        .orElseThrow(
            () ->
                new WorkspaceException(
                    "image '" + name + "' does not exist here: see `sandbox4j image ls`"));
  }

  static String newId() {
    char[] id = new char[12];
    id[0] = ID_ALPHABET.charAt(RANDOM.nextInt(26)); // a letter first: it is the hostname
    for (int i = 1; i < id.length; i++) {
      id[i] = ID_ALPHABET.charAt(RANDOM.nextInt(ID_ALPHABET.length()));
    }
    return new String(id);
  }

  /** The upper layer starts with what makes this sandbox itself: its hostname, resolvable. */
  public static void prepareUpperLayer(Path dir, String id) throws IOException {
    Path upper = Files.createDirectories(SandboxDisk.upper(dir));
    Files.createDirectories(SandboxDisk.work(dir));
    Files.createDirectories(dir.resolve("rootfs"));
    Path etc = Files.createDirectories(upper.resolve("etc"));
    Files.writeString(etc.resolve("hostname"), id + "\n");
    Files.writeString(
        etc.resolve("hosts"),
        "127.0.0.1\tlocalhost\n127.0.1.1\t" + id + "\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    List<Path> owned =
        new ArrayList<>(List.of(upper, etc, etc.resolve("hostname"), etc.resolve("hosts")));
    if (Files.exists(dir.resolve(Networks.NETWORK_FILE))) {
      // The host's nameservers: mode ALL may ask them (see Networks).
      Files.writeString(etc.resolve("resolv.conf"), Networks.resolvConf());
      owned.add(etc.resolve("resolv.conf"));
    }
    int owner = SandboxRecord.read(dir.resolve("state.json")).hostBase();
    for (Path p : owned) {
      chown(p, owner);
    }
  }

  /** Starts sandbox {@code id}'s container afresh (see {@link ContainerStart}). */
  void start(Path dir, String id, Image image, OciConfig.Limits limits) throws IOException {
    containers.start(dir, id, image, limits);
  }

  /** Gives the running sandbox its veth, address and routes ({@link Networks#attach}). */
  void attachNetwork(String id, Path bundle) {
    containers.attachNetwork(id, bundle);
  }

  /**
   * Mounts the root of sandbox {@code id} unless mounted and writes its OCI bundle from its record,
   * without starting a container: for {@link Checkpoints#restore}, which starts it from a
   * checkpoint instead. The caller holds the sandbox's lock.
   */
  Path prepareBundle(String id) throws IOException {
    return containers.prepareBundle(id);
  }

  /** The directory of sandbox {@code id}, whether or not it exists (see the class comment). */
  public Path dir(String id) {
    SandboxHome.checkId(id);
    return sandboxes.resolve(id);
  }

  /**
   * The identity of a new sandbox, whose root is mounted in {@code dir}: {@code spec}'s, else its
   * image's; as {@code spec}'s user if it names one.
   */
  private SandboxIdentity identity(Path dir, Image image, Spec spec) throws IOException {
    if (spec.user() == null && (spec.identity() != null || image.origin() == null)) {
      // no need to read its /etc/passwd
      return spec.identity() != null ? spec.identity() : SandboxIdentity.SEED;
    }
    ImageUsers users = RootfsPaths.users(dir.resolve("rootfs"), image.name());
    SandboxIdentity identity =
        spec.identity() != null
            ? spec.identity()
            : image.origin() != null
                ? SandboxIdentity.ofImage(image.origin().config(), users)
                : SandboxIdentity.SEED;
    return spec.user() == null ? identity : identity.as(users.resolve(spec.user(), "user"));
  }

  /**
   * Makes directory {@code path} (and its missing parents, as the sandbox's root) in new sandbox
   * {@code id}, the directory itself its user's; with {@code always}, also if it exists already (a
   * working directory the builder named: the user works there). Native calls confined to the
   * sandbox's root: no program of the image is needed.
   */
  private void createWorkingDirectory(
      String id, SandboxRecord record, String path, boolean always) {
    if (!SandboxFiles.usable()) {
      String make = "mkdir -p -- \"$1\" && chown \"$2\" -- \"$1\"";
      Exec.checkAsRoot(
          this,
          id,
          List.of(
              "/bin/sh",
              "-c",
              always ? make : "[ -d \"$1\" ] || { " + make + "; }",
              "sh",
              path,
              record.identity().user()));
      return;
    }
    try {
      new RootfsCalls(this, id)
          .makeDirectoryAsHost(
              path,
              record.hostBase(),
              record.hostBase(),
              record.hostBase() + record.identity().uid(),
              record.hostBase() + record.identity().gid(),
              always);
    } catch (WorkspaceFileException e) {
      // an image's WorkingDir through a link its root does not hold, or a file in the way
      throw new WorkspaceException(
          "the working directory "
              + path
              + " cannot be made in the sandbox's root: "
              + e.getMessage()
              + " (a file, or a link to nothing in the image, is in the way)",
          e);
    }
  }

  // ---- programs of the image ----------------------------------------------------------------

  /** Sandboxes known to have an executable {@code /bin/sh}: a shell is seldom removed. */
  private final java.util.Set<String> withShell =
      java.util.concurrent.ConcurrentHashMap.newKeySet();

  /**
   * Whether running sandbox {@code id} has an executable {@code /bin/sh}, which the engine starts
   * commands with where there is one ({@link Exec#inside}). Looked up in its root, confined to it;
   * a yes is remembered, a no looked up again (a shell may be installed).
   */
  boolean hasShell(String id) {
    if (withShell.contains(id)) {
      return true;
    }
    Path root = sandboxes.resolve(id).resolve("rootfs");
    try {
      if (RootfsPaths.isExecutable(root, "/bin/sh")) {
        withShell.add(id);
        return true;
      }
      // an empty mount point (stopped meanwhile) says nothing of its image: the runtime's error
      // will
      return !RootfsPaths.isMounted(root);
    } catch (IOException e) {
      return true; // no root to look in: the runtime's own error says why
    }
  }

  /**
   * The login shell of an interactive terminal in running sandbox {@code id}: {@code /bin/bash},
   * else {@code /bin/sh}.
   *
   * @throws WorkspaceException if it has neither, naming them and its image
   */
  public String loginShell(String id) {
    try {
      Path root = sandboxes.resolve(id).resolve("rootfs");
      for (String shell : List.of("/bin/bash", "/bin/sh")) {
        if (RootfsPaths.isExecutable(root, shell)) {
          return shell;
        }
      }
    } catch (IOException e) {
      return "/bin/bash"; // no root to look in: the runtime's own error says why
    }
    throw missingProgram(id, "/bin/bash or /bin/sh", "an interactive shell cannot run");
  }

  /** Where {@code program} is on {@code path} in running sandbox {@code id}'s root, if anywhere. */
  Optional<String> findInSandbox(String id, String program, String path) {
    try {
      return RootfsPaths.findOnPath(sandboxes.resolve(id).resolve("rootfs"), program, path);
    } catch (IOException e) {
      throw new WorkspaceException("cannot look for " + program + " in local:" + id + ": " + e, e);
    }
  }

  /**
   * The error for something the engine cannot do in sandbox {@code id} because its image lacks
   * {@code program}: it names both, and says {@code what} follows.
   */
  WorkspaceException missingProgram(String id, String program, String what) {
    String image;
    try {
      image = lockedRecord(id).image();
    } catch (WorkspaceException e) {
      image = "?";
    }
    return new WorkspaceException(
        "sandbox local:"
            + id
            + " has no "
            + program
            + " (its image '"
            + image
            + "' does not provide it): "
            + what);
  }

  /**
   * Whether {@code path} is a directory that running sandbox {@code id}'s user can reach: looked up
   * in its root with the user's permissions ({@link RootfsCalls}), or where this JVM cannot, by
   * {@code test -d} run as the user.
   */
  public boolean isDirectoryForUser(String id, String path) {
    if (SandboxFiles.usable()) {
      try {
        return new RootfsCalls(this, id)
            .call(path, root -> SandboxFileWrites.isDirectory(root, path));
      } catch (dev.sandbox4j.workspace.WorkspaceFileException e) {
        return false; // not searchable for the user, say: as test -d says
      }
    }
    SandboxIdentity identity = record(id).identity();
    return Exec.run(
            this,
            id,
            identity.user(),
            "/",
            identity.envMap(),
            List.of("/bin/sh", "-c", "test -d \"$1\"", "sh", path),
            dev.sandbox4j.workspace.RunOptions.defaults(),
            System.nanoTime())
        .succeeded();
  }

  // ---- attach ----------------------------------------------------------------------------

  /**
   * Checks that sandbox {@code id} exists and runs, starting its container again if it stopped
   * (after a host reboot, say: its disk is kept, its processes are not).
   *
   * @throws WorkspaceUnavailableException if it does not exist or is being destroyed
   */
  public void attach(String id) {
    SandboxHome.checkId(id);
    SandboxRecord record = record(id);
    OciRuntime runtime = runtime(record.isolation());
    if (record.status() == SandboxRecord.Status.RUNNING
        && runtime.status(id).filter("running"::equals).isPresent()) {
      return;
    }
    Path dir = sandboxes.resolve(id);
    try (FileLock lock = FileLock.acquire(dir.resolve("lock"))) {
      SandboxRecord current = record(id); // re-read: the lock holder may have changed it
      if (!current.status().isUsable()) {
        throw unavailable(
            id,
            "it was interrupted while "
                + current.status().name().toLowerCase(java.util.Locale.ROOT)
                + "; `sandbox4j gc` removes it");
      }
      Freezer.thaw(cgroups, id); // suspended, or interrupted while freezing for a fork or snapshot
      if (current.status() == SandboxRecord.Status.HIBERNATED) {
        Lifecycle.wakeHibernated(this, id, dir); // restores it, or leaves it to start afresh below
      }
      if (runtime.status(id).filter("running"::equals).isEmpty()) {
        runtime.delete(id);
        // The layers it was created on, whatever the image's name points to now.
        Image image = images.layersFor(current.image(), current.layers());
        if (!image.layers().stream().allMatch(Files::isDirectory)) {
          throw unavailable(id, "the layers of its image '" + current.image() + "' are gone");
        }
        start(
            dir,
            id,
            image,
            new OciConfig.Limits(current.memoryBytes(), current.cpus(), current.pids()));
        LOG.log(System.Logger.Level.INFO, "Restarted local sandbox {0}", id);
      }
      if (current.status() != SandboxRecord.Status.RUNNING) {
        current.withStatus(SandboxRecord.Status.RUNNING).write(dir.resolve("state.json"));
        LOG.log(
            System.Logger.Level.INFO,
            "Woke local sandbox {0} ({1})",
            id,
            current.status().name().toLowerCase(java.util.Locale.ROOT));
      }
    } catch (NoSuchFileException e) {
      throw gone(id, "it was destroyed");
    } catch (IOException e) {
      throw new WorkspaceException("cannot attach to local:" + id + ": " + e, e);
    }
  }

  /**
   * Makes sure sandbox {@code id} runs before an operation: cheap (one read of its record) when it
   * does; wakes it ({@link #attach}) when it is suspended or stopped.
   */
  public void wake(String id) {
    if (record(id).status() != SandboxRecord.Status.RUNNING) {
      attach(id);
    }
  }

  /** The sandbox's record; unavailable if it has none. */
  public SandboxRecord record(String id) {
    SandboxHome.checkId(id);
    if (Files.exists(sandboxes.resolve(id).resolve(PARKED))) {
      // a warm pool's member is no one's sandbox yet: nothing may attach to it or wait for its lock
      throw gone(id, "it does not exist (destroyed, or never created on this machine)");
    }
    return lockedRecord(id);
  }

  /**
   * The record of sandbox {@code id}, whose lock the caller holds: also of one being created (and
   * {@linkplain Parked parked}), which {@link #record} treats as absent.
   */
  SandboxRecord lockedRecord(String id) {
    try {
      return SandboxRecord.read(sandboxes.resolve(id).resolve("state.json"));
    } catch (NoSuchFileException e) {
      throw gone(id, "it does not exist (destroyed, or never created on this machine)");
    } catch (IOException e) {
      throw new WorkspaceException("cannot read the state of local:" + id + ": " + e, e);
    }
  }

  /** Whether the sandbox still exists and is not being destroyed. */
  public boolean isAlive(String id) {
    try {
      return record(id).status().isUsable();
    } catch (WorkspaceException e) {
      return false;
    }
  }

  public static WorkspaceUnavailableException unavailable(String id, String why) {
    return new WorkspaceUnavailableException("sandbox local:" + id + " is unavailable: " + why);
  }

  /** The error for a sandbox that is gone: what ended it if a timer did ({@link Timers}). */
  private WorkspaceUnavailableException gone(String id, String why) {
    return Timers.ended(home, id).orElseGet(() -> unavailable(id, why));
  }

  // ---- destroy ----------------------------------------------------------------------------

  /**
   * Kills every process, unmounts, and deletes the sandbox's files and cgroups. Idempotent: a
   * sandbox that is already gone, or half gone after a crash, is finished off quietly.
   */
  public void destroy(String id) {
    SandboxHome.checkId(id);
    Path dir = sandboxes.resolve(id);
    if (Files.isDirectory(dir)) {
      try (FileLock lock =
          Files.exists(dir.resolve(PARKED))
              ? FileLock.tryAcquire(dir.resolve("lock")).orElse(null)
              : FileLock.acquire(dir.resolve("lock"))) {
        if (lock == null) {
          return; // a warm pool's member that its pool holds: no one else's to destroy
        }
        Path state = dir.resolve("state.json");
        if (Files.exists(state) && !SandboxRecord.isTorn(state)) {
          SandboxRecord.read(state).withStatus(SandboxRecord.Status.DESTROYING).write(state);
        }
        teardown(id, dir);
      } catch (NoSuchFileException e) {
        // destroyed meanwhile by someone else
      } catch (IOException e) {
        throw new WorkspaceException("cannot destroy local:" + id + ": " + e, e);
      }
    } else {
      deleteContainer(id);
      cgroups.removeSandbox(id);
    }
  }

  /**
   * Deletes the container of sandbox {@code id} under whichever runtime has it: a record that is
   * torn or gone (an interrupted create) cannot say which.
   */
  void deleteContainer(String id) {
    stopExecHelper(id);
    helperLocks.remove(id);
    for (OciRuntime r : runtimes()) {
      r.delete(id);
    }
    isolations.remove(id); // the sandbox is going: its id is never used again
    withShell.remove(id);
  }

  /** Tears sandbox {@code id} down; the caller holds its lock. */
  void teardown(String id, Path dir) throws IOException {
    long idBase = idBaseOf(dir);
    java.util.concurrent.CompletableFuture<Void> unrouted = networks.unroute(dir, id);
    Freezer.thaw(cgroups, id); // a frozen process would not die
    deleteContainer(id);
    cgroups.removeSandbox(id);
    try {
      unrouted.join();
    } catch (java.util.concurrent.CompletionException e) {
      throw e.getCause() instanceof RuntimeException r ? r : e;
    }
    networks.release(dir, id); // its address only once its container is gone
    Overlay.unmount(dir.resolve("rootfs"));
    SandboxDisk.release(dir); // out of the mount table now, unmounted off this path
    // Renamed away first: from here on no one can read a record, so the id is simply gone.
    Path trash = sandboxes.resolve(".destroyed-" + id + "-" + newId());
    Files.move(dir, trash, StandardCopyOption.ATOMIC_MOVE);
    Trees.delete(trash);
    // Once nothing of it is left; a record a crash tore no longer says which block it had.
    if (idBase < 0) {
      IdBlocks.freeAll(home, id);
    } else {
      IdBlocks.free(home, id, idBase);
    }
  }

  /** The block of host ids its record names; 0 if none (made before blocks), -1 if unreadable. */
  private static long idBaseOf(Path dir) {
    try {
      Path state = dir.resolve("state.json");
      return Files.exists(state) && !SandboxRecord.isTorn(state)
          ? SandboxRecord.read(state).idBase()
          : -1;
    } catch (IOException e) {
      return -1;
    }
  }

  // ---- list and gc ------------------------------------------------------------------------

  public List<SandboxRecord> list() {
    if (!Files.isDirectory(sandboxes)) {
      return List.of();
    }
    List<SandboxRecord> records = new ArrayList<>();
    try (Stream<Path> dirs = Files.list(sandboxes)) {
      for (Path dir : dirs.sorted().toList()) {
        String name = dir.getFileName().toString();
        if (!SandboxHome.isId(name) || Files.exists(dir.resolve(PARKED))) {
          continue; // a warm pool's member is no one's sandbox yet
        }
        try {
          records.add(SandboxRecord.read(dir.resolve("state.json")));
        } catch (IOException e) {
          // being created or destroyed right now
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot list sandboxes in " + sandboxes + ": " + e, e);
    }
    return records;
  }

  /**
   * Removes what crashes left: sandboxes interrupted while being created or destroyed (nobody holds
   * their lock), directories of half-destroyed ones, containers, mounts and cgroups that belong to
   * no sandbox, and leftovers of interrupted image builds. Returns what it removed ({@link
   * SandboxGc}).
   */
  public List<String> gc() {
    return new SandboxGc(this).gc();
  }

  // ---- helpers ----------------------------------------------------------------------------

  private static void chown(Path p, int id) throws IOException {
    Files.setAttribute(p, "unix:uid", id, java.nio.file.LinkOption.NOFOLLOW_LINKS);
    Files.setAttribute(p, "unix:gid", id, java.nio.file.LinkOption.NOFOLLOW_LINKS);
  }

  /**
   * Installs the home's egress-proxy CA into sandbox {@code id}'s trust store, for a policy that
   * intercepts TLS ({@link Networks#installCaArgv}); nothing otherwise. The CA certificate is
   * public; its key stays in the home.
   */
  public void installCaIfIntercepting(String id) {
    if (!Networks.policy(dir(id)).interceptTls()) {
      return;
    }
    String pem;
    try {
      pem = EgressProxy.caCertificatePem(home);
    } catch (IOException e) {
      throw new WorkspaceException("cannot read the egress proxy's CA: " + e.getMessage(), e);
    }
    Exec.checkAsRoot(this, id, Networks.installCaArgv(pem));
  }
}
