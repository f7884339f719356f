package dev.sandbox4j.runtime;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * An OCI runtime's command line: {@code crun} by default; {@code runc} and {@code runsc} (gVisor)
 * speak the same {@code run -d / exec / state / delete} dialect. Its state lives in the engine's
 * own root directory, so {@code gc} can tell our containers from anyone else's.
 *
 * @param binary the runtime executable
 * @param stateRoot the runtime's {@code --root} directory
 */
record OciRuntime(Path binary, Path stateRoot) {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final java.time.Duration INIT_WAIT = java.time.Duration.ofSeconds(10);

  /** crun's annotation for a seccomp filter that is already compiled (base64 BPF). */
  static final String SECCOMP_BPF_ANNOTATION = "run.oci.seccomp_bpf_data";

  /** The largest filter the kernel loads: 4096 instructions of 8 bytes. */
  private static final long MAX_BPF_BYTES = 4096 * 8;

  /** Compiled default filters by runtime binary identity (see {@link #compiledSeccomp}). */
  private static final Map<String, String> COMPILED_SECCOMP =
      new java.util.concurrent.ConcurrentHashMap<>();

  OciRuntime {
    Objects.requireNonNull(binary, "binary");
    Objects.requireNonNull(stateRoot, "stateRoot");
  }

  /** The runtime called {@code name} on PATH ({@code crun}, {@code runc}, {@code runsc}, ...). */
  static Optional<Path> find(String name) {
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

  /**
   * Creates and starts the container of {@code bundle}, detached. Its init inherits the runtime's
   * stdout, so that goes to {@code bundle/runtime.log}, not to a pipe nobody drains.
   */
  void run(String id, Path bundle) {
    Path pidFile = bundle.resolve("init.pid");
    Optional<String> binaryKey = binaryKey();
    boolean compiled = binaryKey.isPresent() && COMPILED_SECCOMP.containsKey(binaryKey.get());
    HostCommand.checkLogged(
        base("run", "-d", "--pid-file", pidFile.toString(), "--bundle", bundle.toString(), id),
        bundle.resolve("runtime.log"));
    if (!compiled && binaryKey.isPresent()) {
      learnSeccomp(binaryKey.get(), id);
    }
    awaitInit(id, pidFile);
  }

  /**
   * {@link SeccompProfile#DEFAULT} as this runtime compiled it for an earlier sandbox, base64, if
   * it did. crun compiles a spec's seccomp profile with libseccomp on every start (about 2 ms of
   * CPU, a sixth of a start) and leaves the result in its state directory as {@code seccomp.bpf};
   * the same binary compiles the same profile on the same kernel to the same filter, so later
   * starts hand it over precompiled. Kept per JVM (a kernel cannot change under it) and keyed by
   * the binary's path, size and modification time, so an upgraded runtime compiles anew.
   */
  Optional<String> compiledSeccomp() {
    return binaryKey().map(COMPILED_SECCOMP::get);
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
  Optional<String> status(String id) {
    if (!Files.isDirectory(stateRoot.resolve(id))) {
      return Optional.empty();
    }
    HostCommand.Result r = HostCommand.run(base("state", id));
    if (!r.ok()) {
      if (!Files.isDirectory(stateRoot.resolve(id))) {
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

  /** Kills every process of the container and forgets it; quiet if it does not exist. */
  void delete(String id) {
    HostCommand.Result r = HostCommand.run(base("delete", "-f", id));
    if (!r.ok() && status(id).isPresent()) {
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "cannot delete container " + id + ": " + r.output());
    }
  }

  /** The ids of every container in our state root. */
  List<String> list() {
    HostCommand.Result r = HostCommand.run(base("list", "-q"));
    if (!r.ok() || r.stdout().isBlank()) {
      return List.of();
    }
    return List.of(r.stdout().split("\\s+"));
  }

  /**
   * The argv of {@code exec}: the process runs as {@code user} in {@code cwd} with exactly {@code
   * env} (crun's {@code -e} replaces the environment), inside the command cgroup {@code group};
   * with {@code tty}, on a terminal crun allocates and relays from its own stdin/stdout.
   */
  List<String> execArgv(
      String id,
      String group,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> argv,
      boolean tty) {
    List<String> out = base("exec", "--cgroup", group, "--user", user, "--cwd", cwd);
    if (tty) {
      out.add("-t");
    }
    env.forEach((k, v) -> out.add("--env=" + k + "=" + v));
    out.add(id);
    out.addAll(argv);
    return out;
  }

  private List<String> base(String... args) {
    List<String> argv = new ArrayList<>();
    argv.add(binary.toString());
    argv.add("--root");
    argv.add(stateRoot.toString());
    argv.addAll(List.of(args));
    return argv;
  }
}
