package dev.sandbox4j.runtime.internal.oci;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.linux.Mounts;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An OCI runtime's command line: {@code crun} by default, {@code runc} alike; gVisor's {@code
 * runsc} for sandboxes with gVisor isolation, whose dialect differs in places ({@code -detach},
 * {@code -force}, {@code -quiet}, {@code exec --process}, {@link #GVISOR_FLAGS}, its state kept in
 * a file per container rather than a directory): {@link #isGvisor} says which. Its state lives in
 * the engine's own root directory, so {@code gc} can tell our containers from anyone else's.
 *
 * <p>The default crun is the one {@code sandbox4j setup} builds into {@link #FIXED_CRUN} when the
 * system's is older than 1.9 (see {@link #unsafeWhenForkFails}), else {@code crun} on PATH.
 *
 * @param binary the runtime executable
 * @param stateRoot the runtime's {@code --root} directory
 * @param version the first line of {@code binary --version}, e.g. {@code crun version 1.21}, or
 *     empty if it could not be read
 */
public record OciRuntime(Path binary, Path stateRoot, String version) {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final java.time.Duration INIT_WAIT = java.time.Duration.ofSeconds(10);
  private static final Pattern VERSION = Pattern.compile("(\\d+)\\.(\\d+)");

  /**
   * Where {@code sandbox4j setup} installs a crun it built, off PATH so that nothing but this
   * engine picks it up.
   */
  static final Path FIXED_CRUN = Path.of("/usr/local/libexec/sandbox4j/crun");

  /** The first crun release whose {@code exec} fails cleanly when it cannot fork. */
  static final int[] FIRST_SAFE_CRUN = {1, 9};

  /** crun's annotation for a seccomp filter that is already compiled (base64 BPF). */
  public static final String SECCOMP_BPF_ANNOTATION = "run.oci.seccomp_bpf_data";

  /** The largest filter the kernel loads: 4096 instructions of 8 bytes. */
  private static final long MAX_BPF_BYTES = 4096 * 8;

  /** Compiled default filters by runtime binary identity (see {@link #compiledSeccomp}). */
  private static final Map<String, String> COMPILED_SECCOMP =
      new java.util.concurrent.ConcurrentHashMap<>();

  public OciRuntime {
    Objects.requireNonNull(binary, "binary");
    Objects.requireNonNull(stateRoot, "stateRoot");
    Objects.requireNonNull(version, "version");
  }

  /** The runtime {@code binary}, its version read from {@code binary --version}. */
  public OciRuntime(Path binary, Path stateRoot) {
    this(binary, stateRoot, versionLine(binary));
  }

  /** The runtime called {@code name} on PATH ({@code crun}, {@code runc}, {@code runsc}, ...). */
  public static Optional<Path> find(String name) {
    if (name.contains("/")) {
      Path p = Path.of(name);
      return Files.isExecutable(p) ? Optional.of(p) : Optional.empty();
    }
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
      Path p = Path.of(dir.isEmpty() ? "." : dir, name);
      if (Files.isExecutable(p)) {
        return Optional.of(p);
      }
    }
    for (String dir : List.of("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin")) {
      Path p = Path.of(dir, name);
      if (Files.isExecutable(p)) {
        return Optional.of(p);
      }
    }
    return Optional.empty();
  }

  /** The engine's default runtime: setup's {@link #FIXED_CRUN} if installed, else crun on PATH. */
  public static Optional<Path> defaultCrun() {
    if (Files.isRegularFile(FIXED_CRUN) && Files.isExecutable(FIXED_CRUN)) {
      return Optional.of(FIXED_CRUN);
    }
    return find("crun");
  }

  /** The first line of {@code program --version}, or empty. */
  static String versionLine(Path program) {
    try {
      HostCommand.Result r = HostCommand.run(List.of(program.toString(), "--version"));
      return r.ok() ? r.stdout().lines().findFirst().orElse("").strip() : "";
    } catch (RuntimeException e) {
      return "";
    }
  }

  /** Whether a {@code --version} line names a release at least {@code major.minor}. */
  static boolean atLeast(String versionLine, int[] majorMinor) {
    Matcher m = VERSION.matcher(versionLine);
    if (!m.find()) {
      return false;
    }
    int major = Integer.parseInt(m.group(1));
    int minor = Integer.parseInt(m.group(2));
    return major > majorMinor[0] || (major == majorMinor[0] && minor >= majorMinor[1]);
  }

  /**
   * Whether this is a crun older than 1.9 (or one whose version cannot be read): its {@code exec}
   * forks after joining the sandbox's pids cgroup, and when that fork fails (code in the sandbox
   * holds every pid) it carries on in its own process, still in the host's namespaces: it chdirs
   * and looks the program up on the host's file system, chowns its stdio to the sandbox user's uid
   * as a host uid and setuids to it, until a write to its sync pipe kills it. crun 1.9 fixed it.
   */
  public boolean unsafeWhenForkFails() {
    String name = binary.getFileName().toString();
    return name.startsWith("crun") && !atLeast(version, FIRST_SAFE_CRUN);
  }

  /**
   * Whether {@code crun} was built with checkpoint/restore support ({@code +CRIU} in its {@code
   * --version} features line).
   */
  public static boolean supportsCheckpoint(Path crun) {
    try {
      HostCommand.Result r = HostCommand.run(List.of(crun.toString(), "--version"));
      return r.ok() && r.stdout().contains("+CRIU");
    } catch (RuntimeException e) {
      return false;
    }
  }

  /**
   * Creates and starts the container of {@code bundle}, detached. Its init inherits the runtime's
   * stdio, so that is {@code /dev/null} (crun moves it to the sandbox's own {@code /dev/null}): a
   * host file or pipe there would be an fd into the host that a checkpoint cannot carry. The
   * runtime's own messages go to {@code bundle/runtime.log} ({@code --log}).
   */
  public void run(String id, Path bundle) {
    Path pidFile = bundle.resolve("init.pid");
    Optional<String> binaryKey = binaryKey();
    boolean compiled = binaryKey.isPresent() && COMPILED_SECCOMP.containsKey(binaryKey.get());
    List<String> argv =
        logTo(
            bundle.resolve("runtime.log"),
            "run",
            isGvisor() ? "-detach" : "-d",
            "--pid-file",
            pidFile.toString(),
            "--bundle",
            bundle.toString(),
            id);
    if (isGvisor() && HelperBuilds.REAPER.present()) {
      // runsc leaves the Sentry and gofer behind: the reaper keeps them as its children, so that
      // a destroy's `runsc delete` (which waits until the killed Sentry's pid is gone) does not
      // wait for the host's init to reap it (about 1.7 s on a VM whose init reaps once a second)
      argv.addFirst(HelperBuilds.REAPER.installed().toString());
    }
    quietly(argv, bundle.resolve("runtime.log"), Map.of());
    if (!compiled && binaryKey.isPresent()) {
      learnSeccomp(binaryKey.get(), id);
    }
    if (!isGvisor()) { // runsc's pid file names its Sentry, which never becomes the init
      awaitInit(id, pidFile);
    }
  }

  /** The pid (on the host) of the container's init, from the pid file of its run or restore. */
  public static Optional<Long> initPid(Path bundle) {
    try {
      return Optional.of(Long.parseLong(Files.readString(bundle.resolve("init.pid")).strip()));
    } catch (java.io.IOException | NumberFormatException e) {
      return Optional.empty();
    }
  }

  /**
   * {@code crun checkpoint}: CRIU dumps every process of the container into {@code images}, its log
   * into {@code work/dump.log}; with {@code leaveRunning} the processes go on (a frozen container
   * stays frozen), else they are killed. {@code env} is CRIU's environment (see {@link
   * Checkpoints}).
   */
  public void checkpoint(
      String id, Path images, Path work, boolean leaveRunning, Map<String, String> env) {
    List<String> argv =
        logTo(
            work.resolve("runtime.log"),
            "checkpoint",
            "--image-path",
            images.toString(),
            "--work-path",
            work.toString(),
            "--manage-cgroups-mode",
            "soft",
            "--tcp-established",
            "--network-lock",
            "skip");
    if (leaveRunning) {
      argv.add("--leave-running");
    }
    argv.add(id);
    // CRIU writes the images with its process's umask (0644): the memory of the sandbox's
    // processes is owner-only from the moment it is on disk, not only behind a 0700 directory.
    List<String> ownerOnly = new java.util.ArrayList<>(List.of("/bin/sh", "-c", UMASK_077, "sh"));
    ownerOnly.addAll(argv);
    keepingFavorDynmods(() -> quietly(ownerOnly, work.resolve("runtime.log"), env));
  }

  /**
   * Runs a CRIU call, then puts back the cgroup2 mount option it clears (see HostSetup). A marker
   * file says, while the call runs, that the option is to be put back: if this JVM dies meanwhile,
   * {@link #restoreFavorDynmodsAfterCrash} (gc) does it.
   */
  private void keepingFavorDynmods(Runnable criuCall) {
    boolean wasSet = Mounts.favorDynmodsSet();
    Path marker = stateRoot.resolve(FAVOR_DYNMODS_MARKER);
    if (wasSet) {
      try {
        PrivateFiles.createPrivateDirectories(stateRoot);
        Files.writeString(marker, "");
      } catch (IOException e) {
        throw new WorkspaceException("cannot write " + marker + ": " + e.getMessage(), e);
      }
    }
    try {
      criuCall.run();
    } finally {
      restoreFavorDynmodsAfterCrash(); // also a marker a crashed JVM left
    }
  }

  /** Puts {@code favordynmods} back if a CRIU call that cleared it did not finish (see above). */
  public void restoreFavorDynmodsAfterCrash() {
    Path marker = stateRoot.resolve(FAVOR_DYNMODS_MARKER);
    if (Files.exists(marker)) {
      if (!Mounts.favorDynmodsSet()) {
        Mounts.restoreFavorDynmods();
      }
      try {
        Files.deleteIfExists(marker);
      } catch (IOException e) {
        // tried again by the next gc
      }
    }
  }

  private static final String FAVOR_DYNMODS_MARKER = "favordynmods.restore";

  /** Runs its arguments with umask 077 (Java cannot set a child's umask). */
  private static final String UMASK_077 = "umask 077 && exec \"$@\"";

  /**
   * {@code crun restore}: starts container {@code id} of {@code bundle} with the processes of the
   * checkpoint in {@code images}, detached, its init's pid in {@code bundle/init.pid}; CRIU's log
   * goes to {@code work/restore.log}. Then {@code seccompFilter} becomes the filter of every
   * command exec'd into it ({@link #installSeccompFilter}); if that fails, the restored container
   * is deleted: it never runs a command unfiltered.
   */
  public void restore(
      String id,
      Path bundle,
      Path images,
      Path work,
      Map<String, String> env,
      byte[] seccompFilter) {
    keepingFavorDynmods(
        () ->
            quietly(
                logTo(
                    work.resolve("runtime.log"),
                    "restore",
                    "--detach",
                    "--bundle",
                    bundle.toString(),
                    "--pid-file",
                    bundle.resolve("init.pid").toString(),
                    "--image-path",
                    images.toString(),
                    "--work-path",
                    work.toString(),
                    "--manage-cgroups-mode",
                    "soft",
                    "--tcp-established",
                    "--network-lock",
                    "skip",
                    id),
                work.resolve("runtime.log"),
                env));
    try {
      installSeccompFilter(id, seccompFilter);
    } catch (RuntimeException e) {
      try {
        delete(id);
      } catch (RuntimeException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
  }

  /**
   * The compiled seccomp filter that {@code crun exec} applies to every command in container {@code
   * id}: crun loads it from {@code seccomp.bpf} in the container's state directory, and when that
   * file is missing it runs the command with no filter at all. {@code crun run} writes it; {@code
   * crun restore} does not (CRIU restores the filter of the processes it carries, not the file), so
   * after a restore the engine writes it ({@link #installSeccompFilter}).
   */
  public Path seccompFile(String id) {
    return stateRoot.resolve(id).resolve(SECCOMP_FILE);
  }

  private static final String SECCOMP_FILE = "seccomp.bpf";

  /** The compiled seccomp filter of container {@code id}, if its state directory has one. */
  public Optional<byte[]> seccompFilter(String id) {
    try {
      byte[] bpf = Files.readAllBytes(seccompFile(id));
      return validBpf(bpf) ? Optional.of(bpf) : Optional.empty();
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /**
   * {@link #compiledSeccomp()} as raw bytes: the default filter this runtime compiled for an
   * earlier sandbox in this JVM, if it did.
   */
  public Optional<byte[]> compiledSeccompBytes() {
    return compiledSeccomp().map(java.util.Base64.getDecoder()::decode);
  }

  /**
   * Writes {@code bpf} as container {@code id}'s {@link #seccompFile}, atomically (a concurrent
   * exec sees no file or the whole filter), readable by root only.
   */
  void installSeccompFilter(String id, byte[] bpf) {
    if (!validBpf(bpf)) {
      throw new WorkspaceException(
          "not a seccomp filter for container " + id + ": " + bpf.length + " bytes");
    }
    Path file = seccompFile(id);
    Path temp = file.resolveSibling(SECCOMP_FILE + ".tmp");
    try {
      Files.deleteIfExists(temp);
      Files.write(temp, bpf, java.nio.file.StandardOpenOption.CREATE_NEW);
      Files.setPosixFilePermissions(
          temp, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
      Files.move(temp, file, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot write the seccomp filter of container " + id + " (" + file + "): " + e, e);
    }
  }

  /**
   * Fails unless a command exec'd into container {@code id} gets its seccomp filter: with crun, the
   * container's state directory must hold {@link #seccompFile}. A container without a state
   * directory is left to the runtime, whose exec fails on its own. One stat per command.
   *
   * @throws WorkspaceException if the command would run without the filter
   */
  public void requireExecFilter(String id) {
    if (!binary.getFileName().toString().startsWith("crun")
        || Files.exists(seccompFile(id))
        || !Files.isDirectory(stateRoot.resolve(id))) {
      return;
    }
    throw new WorkspaceException(
        "refusing to run a command in sandbox local:"
            + id
            + ": its runtime state has no seccomp filter ("
            + seccompFile(id)
            + "), so the command would run unfiltered; stop and start the sandbox");
  }

  private static boolean validBpf(byte[] bpf) {
    return bpf.length > 0 && bpf.length <= MAX_BPF_BYTES && bpf.length % 8 == 0;
  }

  /** The argv of a runtime command whose messages go to {@code log}. */
  private List<String> logTo(Path log, String... args) {
    List<String> argv = base("--log=" + log);
    argv.addAll(List.of(args));
    return argv;
  }

  /**
   * Runs a runtime command with stdin, stdout and stderr on {@code /dev/null} (what a container's
   * init inherits) and {@code env} added; fails with the runtime's log unless it exits 0.
   */
  private static void quietly(List<String> argv, Path log, Map<String, String> env) {
    java.io.File devNull = new java.io.File("/dev/null");
    try {
      Files.deleteIfExists(log); // crun appends: only this run's messages
    } catch (java.io.IOException e) {
      // the runtime reports what it cannot write
    }
    ProcessBuilder builder =
        new ProcessBuilder(argv)
            .redirectInput(ProcessBuilder.Redirect.from(devNull))
            .redirectOutput(ProcessBuilder.Redirect.appendTo(devNull))
            .redirectError(ProcessBuilder.Redirect.appendTo(devNull));
    builder.environment().putAll(env);
    try {
      Process p = builder.start();
      if (!p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new dev.sandbox4j.workspace.WorkspaceException(
            String.join(" ", argv) + " did not finish within 120 s");
      }
      if (p.exitValue() != 0) {
        String said = "";
        try {
          said = Files.readString(log).strip();
        } catch (java.io.IOException e) {
          // no log: the runtime failed before opening it
        }
        throw new dev.sandbox4j.workspace.WorkspaceException(
            String.join(" ", argv)
                + " failed (exit "
                + p.exitValue()
                + ")"
                + (said.isEmpty() ? "" : ": " + said));
      }
    } catch (java.io.IOException e) {
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "cannot run " + argv.getFirst() + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while running " + argv);
    }
  }

  /**
   * {@link SeccompProfile#DEFAULT} as this runtime compiled it for an earlier sandbox, base64, if
   * it did. crun compiles a spec's seccomp profile with libseccomp on every start (about 2 ms of
   * CPU, a sixth of a start) and leaves the result in its state directory as {@code seccomp.bpf};
   * the same binary compiles the same profile on the same kernel to the same filter, so later
   * starts hand it over precompiled. Kept per JVM (a kernel cannot change under it) and keyed by
   * the binary's path, size and modification time, so an upgraded runtime compiles anew.
   */
  public Optional<String> compiledSeccomp() {
    return binaryKey().map(COMPILED_SECCOMP::get);
  }

  /**
   * Forgets every filter compiled in this JVM, as a new JVM starts (after a host reboot, say): for
   * tests that simulate one.
   */
  public static void forgetCompiledSeccomp() {
    COMPILED_SECCOMP.clear();
  }

  /**
   * Keeps the filter the runtime just compiled for container {@code id}, if it left one (crun does,
   * runc does not). Its state directory is root's alone, so nothing in a sandbox can have written
   * it.
   */
  private void learnSeccomp(String key, String id) {
    Path bpf = stateRoot.resolve(id).resolve("seccomp.bpf");
    try {
      long size = Files.size(bpf);
      if (size > 0 && size <= MAX_BPF_BYTES && size % 8 == 0) {
        COMPILED_SECCOMP.putIfAbsent(
            key, java.util.Base64.getEncoder().encodeToString(Files.readAllBytes(bpf)));
      }
    } catch (java.io.IOException e) {
      // no compiled filter to keep: every start compiles the profile
    }
  }

  private Optional<String> binaryKey() {
    try {
      var attributes =
          Files.readAttributes(binary, java.nio.file.attribute.BasicFileAttributes.class);
      return Optional.of(
          binary.toAbsolutePath()
              + "|"
              + attributes.size()
              + "|"
              + attributes.lastModifiedTime().toMillis());
    } catch (java.io.IOException e) {
      return Optional.empty();
    }
  }

  /**
   * Waits until the container's init has become {@code catatonit}. The runtime returns as soon as
   * it has let the init go, possibly while the init is still in execve; a {@code crun exec} whose
   * setns(2) lands in that window fails with EPERM ("fail startup"), as seen under load.
   */
  private static void awaitInit(String id, Path pidFile) {
    long end = System.nanoTime() + INIT_WAIT.toNanos();
    try {
      Path comm = Path.of("/proc", Files.readString(pidFile).strip(), "comm");
      while (System.nanoTime() < end) {
        if (Files.readString(comm).strip().equals("catatonit")) {
          return;
        }
        Thread.sleep(1);
      }
    } catch (java.io.IOException e) {
      // no pid file or no such process: the first exec will say what is wrong
      return;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while starting " + id);
    }
    throw new dev.sandbox4j.workspace.WorkspaceException(
        "the init of container " + id + " did not start within " + INIT_WAIT.toSeconds() + " s");
  }

  /**
   * The container's status ({@code running}, {@code paused}, {@code stopped}), or empty if the
   * runtime has no such container (its state directory is gone, as after a host reboot).
   *
   * @throws dev.sandbox4j.workspace.WorkspaceException if the runtime fails otherwise: guessing
   *     "gone" then would make attach restart, and so kill, a running sandbox
   */
  public Optional<String> status(String id) {
    if (!hasState(id)) {
      return Optional.empty();
    }
    HostCommand.Result r = HostCommand.run(base("state", id));
    if (!r.ok()) {
      if (!hasState(id)) {
        return Optional.empty(); // deleted meanwhile
      }
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "cannot read the state of container " + id + ": " + r.output());
    }
    try {
      JsonNode state = JSON.readTree(r.stdout());
      return Optional.of(state.path("status").asText("unknown"));
    } catch (java.io.IOException e) {
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "cannot parse the state of container " + id + ": " + r.stdout(), e);
    }
  }

  /**
   * Whether the runtime keeps state for container {@code id}: crun and runc a directory of that
   * name, runsc a file {@code <sandbox>_sandbox:<container>.state} (one container per sandbox
   * here).
   */
  private boolean hasState(String id) {
    return isGvisor()
        ? Files.exists(stateRoot.resolve(id + "_sandbox:" + id + ".state"))
        : Files.isDirectory(stateRoot.resolve(id));
  }

  /** Kills every process of the container and forgets it; quiet if it does not exist. */
  public void delete(String id) {
    if (!hasState(id)) {
      return; // no container of this runtime: the engine asks every runtime
      // (Engine.deleteContainer)
    }
    HostCommand.Result r = HostCommand.run(base("delete", isGvisor() ? "-force" : "-f", id));
    if (!r.ok() && status(id).isPresent()) {
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "cannot delete container " + id + ": " + r.output());
    }
  }

  /** The ids of every container in our state root. */
  public List<String> list() {
    HostCommand.Result r = HostCommand.run(base("list", isGvisor() ? "-quiet" : "-q"));
    if (!r.ok() || r.stdout().isBlank()) {
      return List.of();
    }
    return List.of(r.stdout().split("\\s+"));
  }

  /**
   * The argv of {@code exec}: the process runs as {@code user} in {@code cwd} with exactly {@code
   * env} (crun's {@code -e} replaces the environment), inside the command cgroup {@code group};
   * with {@code tty}, on a terminal crun allocates and relays from its own stdin/stdout. The
   * runtime writes the process's pid to {@code pidFile} once the process is set up in the
   * container, just before it runs the program: no pid file means the command never started.
   */
  public List<String> execArgv(
      String id,
      String group,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> argv,
      boolean tty,
      Path pidFile) {
    List<String> out =
        base(
            "exec",
            "--cgroup",
            group,
            "--user",
            user,
            "--cwd",
            cwd,
            "--pid-file",
            pidFile.toString());
    if (tty) {
      out.add("-t");
    }
    env.forEach((k, v) -> out.add("--env=" + k + "=" + v));
    out.add(id);
    out.addAll(argv);
    return out;
  }

  /**
   * The argv that starts the exec helper {@code path} with {@code args} in container {@code id},
   * detached ({@code exec -d}: it returns once the helper runs), as root in the container's working
   * directory, in command cgroup {@code group}, with the container's environment.
   */
  public List<String> helperArgv(String id, String group, String path, String... args) {
    List<String> out = base("exec", "-d", "--cgroup", group, "--user", "0:0", "--cwd", "/");
    out.add(id);
    out.add(path);
    out.addAll(List.of(args));
    return out;
  }

  private List<String> base(String... args) {
    List<String> argv = new ArrayList<>();
    argv.add(binary.toString());
    argv.add("--root");
    argv.add(stateRoot.toString());
    if (isGvisor()) {
      argv.addAll(GVISOR_FLAGS);
    }
    argv.addAll(List.of(args));
    return argv;
  }

  /**
   * What every {@code runsc} call of the engine says. {@code --overlay2=none}: the sandbox writes
   * its root file system itself (gVisor's default keeps writes in a file store of its own, where
   * the engine's file operations, disk quota, snapshot and fork would not see them). {@code
   * --file-access=shared}: the engine also writes those files from the host (uploads, edits), which
   * gVisor's default cache would not notice. {@code --network=host}: the Sentry's sockets are the
   * host kernel's, in the sandbox's own network namespace, so the engine's veth, nftables rules,
   * egress proxy and port URLs hold as for a container; gVisor's own network stack would see only
   * the interfaces present when it booted, and a loopback that the host cannot reach.
   */
  static final List<String> GVISOR_FLAGS =
      List.of("--overlay2=none", "--file-access=shared", "--network=host");

  /** Whether this runtime is gVisor's {@code runsc}. */
  public boolean isGvisor() {
    return binary.getFileName().toString().startsWith("runsc");
  }

  /**
   * The argv of a gVisor {@code exec} of the process {@code processFile} describes ({@link
   * OciConfig#execProcess}): no cgroup of its own (the command's processes live in the Sentry, not
   * on the host); the command's pid inside the sandbox goes to {@code internalPidFile} (if not
   * null) once it runs.
   */
  public List<String> gvisorExecArgv(String id, Path processFile, Path internalPidFile) {
    List<String> out = base("exec", "--process", processFile.toString());
    if (internalPidFile != null) {
      out.add("--internal-pid-file");
      out.add(internalPidFile.toString());
    }
    out.add(id);
    return out;
  }
}
