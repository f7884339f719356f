package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.regex.Pattern;

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
 * <p>{@code image}, {@code cpus}, {@code memory}, {@code pids} and labels shape a new sandbox only;
 * {@code workingDirectory} and {@code env} apply to every command, also after attaching. The
 * working directory is created in a new sandbox and must already exist in one attached to.
 *
 * <p>Constructing does no I/O. The first operation needs root, Linux, an OCI runtime and a prepared
 * host ({@code sandbox4j doctor}); the first sandbox on a machine builds the default image (about a
 * minute; {@code progress} reports it). Instances are thread-safe.
 */
public final class LocalSandbox implements WorkspaceProvider {

  /** The provider name in refs. */
  public static final String NAME = "local";

  /** The engine's state directory unless {@code SANDBOX4J_HOME} says otherwise. */
  public static final Path DEFAULT_HOME = Path.of("/var/lib/sandbox4j");

  private static final Pattern LABEL = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/-]{0,62}");
  private static final long GIB = 1L << 30;

  private final Path home;
  private final String runtimeName;
  private final String image;
  private final String workingDirectory;
  private final Map<String, String> env;
  private final int cpus;
  private final long memoryBytes;
  private final int pids;
  private final Map<String, String> labels;
  private final Consumer<String> progress;
  private final ImageStore images;
  private volatile Engine engine;

  /** Sandboxes with every default: see {@link Builder}. */
  public LocalSandbox() {
    this(builder());
  }

  private LocalSandbox(Builder b) {
    this.home = b.home != null ? b.home : defaultHome();
    this.runtimeName = b.runtime;
    this.image = b.image;
    this.workingDirectory = b.workingDirectory;
    this.env = Map.copyOf(b.env);
    this.cpus = b.cpus;
    this.memoryBytes = b.memoryBytes != 0 ? b.memoryBytes : 4 * GIB * b.cpus;
    this.pids = b.pids;
    this.labels = Map.copyOf(b.labels);
    this.progress = b.progress;
    this.images = new ImageStore(home.resolve("images"));
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
    Engine.checkId(ref.id());
    return Optional.of(new LocalSandboxBackend(this, ref.id()));
  }

  @Override
  public void destroy(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException(
          "cannot destroy " + ref + ": it belongs to provider '" + ref.provider() + "', not local");
    }
    engine().destroy(ref.id());
  }

  /** Every sandbox on this machine (of this state directory), sorted by id. */
  public List<SandboxInfo> list() {
    return engine().list().stream().map(SandboxInfo::of).toList();
  }

  /**
   * Removes what crashes left behind: sandboxes interrupted while being created or destroyed, and
   * containers, mounts, cgroups and image builds that belong to nothing. Running sandboxes are
   * never touched. Returns a line per thing removed.
   */
  public List<String> gc() {
    return engine().gc();
  }

  /** The images on this machine (of this state directory), sorted by name. */
  public List<ImageInfo> images() {
    return images.list().stream().map(ImageInfo::of).toList();
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
    requireLinuxAndRoot();
    return ImageInfo.of(rebuild ? images.buildDefault(progress) : images.ensureDefault(progress));
  }

  /**
   * Removes the image called {@code name}. Sandboxes created from it keep running: they hold on to
   * its layers, which are deleted only once nothing uses them (see {@link #gc()}).
   *
   * @return whether there was such an image
   */
  public boolean removeImage(String name) {
    requireLinuxAndRoot();
    if (images.find(name).isEmpty()) {
      return false;
    }
    images.remove(name);
    return true;
  }

  /**
   * Runs an interactive login shell ({@code /bin/bash -l}) as the sandbox user in {@code ref}'s
   * sandbox, on this process's terminal, and returns its exit status when it exits.
   *
   * <p>The shell gets a terminal of its own: {@code crun exec -t} allocates it and relays this
   * process's stdin and stdout, which must be a terminal (check before calling). It starts in the
   * working directory with the sandbox's environment plus this process's {@code TERM}, in a cgroup
   * of its own under the sandbox's limits, like any command. Processes it leaves in the background
   * keep running, as they do after a command.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the sandbox is gone
   * @throws java.util.concurrent.CancellationException if this thread is interrupted; the shell and
   *     everything it started are killed
   */
  public int shell(WorkspaceRef ref) {
    WorkspaceBackend backend =
        backend(ref)
            .orElseThrow(() -> new IllegalArgumentException("not a local sandbox ref: " + ref));
    backend.workingDirectory(); // attaches: unavailable if gone, and checks the directory
    Map<String, String> shellEnv = new LinkedHashMap<>(Engine.BASE_ENV);
    shellEnv.putAll(env);
    String term = System.getenv("TERM");
    if (term != null && !term.isBlank() && !env.containsKey("TERM")) {
      shellEnv.put("TERM", term);
    }
    return Exec.interactive(
        engine(), ref.id(), Engine.USER, workingDirectory, shellEnv, List.of("/bin/bash", "-l"));
  }

  String workingDirectory() {
    return workingDirectory;
  }

  Map<String, String> env() {
    return env;
  }

  Consumer<String> progress() {
    return progress;
  }

  Engine.Spec spec() {
    return new Engine.Spec(
        image, workingDirectory, new OciConfig.Limits(memoryBytes, cpus, pids), labels);
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

  private static void requireLinuxAndRoot() {
    if (!System.getProperty("os.name").equals("Linux")) {
      throw new WorkspaceException(
          "local sandboxes need Linux (this is " + System.getProperty("os.name") + ")");
    }
    if (!"root".equals(System.getProperty("user.name"))
        && !Files.isWritable(Path.of("/sys/fs/cgroup"))) {
      throw new WorkspaceException(
          "local sandboxes need root (mounts, cgroups, user namespaces): run as root");
    }
  }

  private Engine openEngine() {
    requireLinuxAndRoot();
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
    return new Engine(
        home,
        images,
        new OciRuntime(binary, home.resolve("run").resolve(binary.getFileName().toString())),
        Cgroups.detect(Cgroups.parentFor(home)));
  }

  /** Builds a {@link LocalSandbox}; every setter validates its argument and names it on error. */
  public static final class Builder {
    private Path home;
    private String runtime; // null: the default crun
    private String image = ImageStore.DEFAULT;
    private String workingDirectory = Engine.HOME;
    private final Map<String, String> env = new LinkedHashMap<>();
    private int cpus = 1;
    private long memoryBytes;
    private int pids = 4096;
    private final Map<String, String> labels = new LinkedHashMap<>();
    private Consumer<String> progress =
        line -> System.getLogger(LocalSandbox.class.getName()).log(System.Logger.Level.INFO, line);

    private Builder() {}

    /** The state directory (default {@code $SANDBOX4J_HOME}, else {@code /var/lib/sandbox4j}). */
    public Builder home(Path home) {
      this.home = Objects.requireNonNull(home, "home").toAbsolutePath().normalize();
      return this;
    }

    /**
     * The OCI runtime: {@code crun}, {@code runc}, {@code runsc}, or a path to one; a name is
     * looked up on PATH. By default, the crun that {@code sandbox4j setup} built into {@code
     * /usr/local/libexec/sandbox4j/crun} when the system's crun was older than 1.9, else {@code
     * crun} on PATH.
     */
    public Builder runtime(String runtime) {
      if (runtime == null || runtime.isBlank()) {
        throw new IllegalArgumentException("runtime must name an OCI runtime, e.g. crun");
      }
      this.runtime = runtime;
      return this;
    }

    /** The image of a new sandbox (default {@code default}: Debian bookworm with dev tools). */
    public Builder image(String image) {
      this.image = Objects.requireNonNull(image, "image");
      return this;
    }

    /**
     * The absolute directory commands start in and relative paths resolve against (default {@code
     * /home/sandbox}). Created in a new sandbox; must exist in one attached to.
     */
    public Builder workingDirectory(String path) {
      if (path == null
          || !path.startsWith("/")
          || path.indexOf('\0') >= 0
          || path.length() > 4096
          || List.of(path.split("/")).contains("..")
          || List.of(path.split("/")).contains(".")
          || (path.length() > 1 && path.endsWith("/"))
          || path.contains("//")) {
        throw new IllegalArgumentException(
            "workingDirectory must be an absolute, normalized path (no '.', '..', '//' or trailing"
                + " '/'): "
                + path);
      }
      this.workingDirectory = path;
      return this;
    }

    /** A variable every command gets (a command's own env wins). */
    public Builder env(String name, String value) {
      if (name == null || name.isEmpty() || name.contains("=") || name.indexOf('\0') >= 0) {
        throw new IllegalArgumentException("invalid env name '" + name + "'");
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
      vars.forEach(this::env);
      return this;
    }

    /** CPU quota of a new sandbox: 1, 2, 4 or 8 CPUs (default 1). */
    public Builder cpus(int cpus) {
      if (cpus != 1 && cpus != 2 && cpus != 4 && cpus != 8) {
        throw new IllegalArgumentException("cpus must be 1, 2, 4 or 8, was " + cpus);
      }
      this.cpus = cpus;
      return this;
    }

    /** Memory limit of a new sandbox in bytes (default 4 GiB per CPU; at least 64 MiB). */
    public Builder memory(long bytes) {
      if (bytes < 64L << 20) {
        throw new IllegalArgumentException(
            "memory must be at least 64 MiB, was " + bytes + " bytes");
      }
      this.memoryBytes = bytes;
      return this;
    }

    /** Limit on processes of a new sandbox (default 4096; at least 16). */
    public Builder pids(int pids) {
      if (pids < 16) {
        throw new IllegalArgumentException("pids must be at least 16, was " + pids);
      }
      this.pids = pids;
      return this;
    }

    /** A label of a new sandbox, shown by {@link LocalSandbox#list()}. */
    public Builder label(String key, String value) {
      if (key == null || !LABEL.matcher(key).matches()) {
        throw new IllegalArgumentException(
            "invalid label key '" + key + "': letters, digits, '.', '_', '/', '-', up to 63");
      }
      if (value == null || value.length() > 256 || value.chars().anyMatch(c -> c < 0x20)) {
        throw new IllegalArgumentException(
            "invalid value for label " + key + ": up to 256 characters, no control characters");
      }
      labels.put(key, value);
      return this;
    }

    /** Receives progress lines of long work (building the default image). */
    public Builder progress(Consumer<String> progress) {
      this.progress = Objects.requireNonNull(progress, "progress");
      return this;
    }

    /** Returns the provider. */
    public LocalSandbox build() {
      return new LocalSandbox(this);
    }
  }
}
