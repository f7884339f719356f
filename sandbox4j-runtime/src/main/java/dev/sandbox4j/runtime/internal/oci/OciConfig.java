package dev.sandbox4j.runtime.internal.oci;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.HostLimits;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The OCI runtime spec ({@code config.json}) of one sandbox. PID 1 is {@code catatonit -P}, an init
 * that only reaps zombies; commands come in through {@code exec}.
 *
 * <p>The init is the host's own statically linked {@code catatonit}, bind-mounted read-only at
 * {@value #INIT} (inside the sandbox's private {@code /dev} tmpfs, so nothing is added to its root
 * filesystem), so that an image needs no init of its own: imported images rarely have one. Where
 * the host has none (or only a dynamically linked one), the image's {@code /usr/bin/catatonit} is
 * used, which the default image has.
 */
public final class OciConfig {
  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  /** Docker's default capability set: enough for sudo, apt and servers, nothing more. */
  public static final List<String> CAPABILITIES =
      List.of(
          "CAP_CHOWN",
          "CAP_DAC_OVERRIDE",
          "CAP_FSETID",
          "CAP_FOWNER",
          "CAP_MKNOD",
          "CAP_NET_RAW",
          "CAP_SETGID",
          "CAP_SETUID",
          "CAP_SETFCAP",
          "CAP_SETPCAP",
          "CAP_NET_BIND_SERVICE",
          "CAP_SYS_CHROOT",
          "CAP_KILL",
          "CAP_AUDIT_WRITE");

  /** Where the host's init appears in a sandbox. */
  static final String INIT = "/dev/catatonit";

  /** The host's static catatonit, if it has one. */
  private static final Optional<Path> HOST_INIT = findHostInit();

  /**
   * Where {@code sandbox4j setup} installs the exec helper (see the engine's {@code ExecHelper}).
   */
  public static final Path HOST_EXEC_HELPER =
      Path.of("/usr/local/libexec/sandbox4j/sandbox4j-execd");

  /** Where the exec helper appears in a sandbox: beside the init, read-only. */
  static final String EXEC_HELPER = "/dev/sandbox4j-execd";

  /**
   * Whether the host has the exec helper, a static executable: new sandboxes then get it
   * bind-mounted at {@value #EXEC_HELPER}. Read at every create, so that a host set up while the
   * engine runs gives the next sandbox the fast exec.
   */
  public static boolean hasExecHelper() {
    return HelperBuilds.EXEC_HELPER.present();
  }

  private OciConfig() {}

  /**
   * Where a sandbox finds {@code catatonit}: the host's, bind-mounted at {@value #INIT}, else the
   * image's. Besides the init, it is what a gVisor sandbox runs each command under (as a subreaper
   * that keeps the command's processes its descendants, see the engine's {@code GvisorExec}).
   */
  public static String initPath() {
    return HOST_INIT.isPresent() ? INIT : "/usr/bin/catatonit";
  }

  /** Limits of one sandbox. */
  public record Limits(long memoryBytes, int cpus, int pids) {}

  /**
   * The spec of sandbox {@code id}, with container ids {@code 0..65535} mapped to host ids from
   * {@code hostBase} (the sandbox's own block, {@link IdBlocks}). {@code compiledSeccomp}, if
   * present, is {@link SeccompProfile#DEFAULT} as the runtime compiled it before (base64 BPF, see
   * {@link OciRuntime#compiledSeccomp}): crun then loads it as it is instead of compiling the
   * profile again. The profile stays in the spec for runtimes that ignore the annotation. {@code
   * hosts}, if present, is bind-mounted read-only at {@code /etc/hosts} (the names of a named
   * network's members, see {@link Networks}). {@code tmp}, if present, is bind-mounted at {@code
   * /tmp} (for gVisor, which would otherwise put a tmpfs of its own there).
   */
  public static byte[] build(
      String id,
      Path rootfs,
      String cgroupsPath,
      Map<String, String> env,
      Limits limits,
      Optional<String> compiledSeccomp,
      Optional<Path> hosts,
      Optional<Path> tmp,
      int hostBase) {
    Map<String, Object> process = new LinkedHashMap<>();
    process.put("terminal", false);
    process.put("user", Map.of("uid", 0, "gid", 0));
    process.put("args", List.of(initPath(), "-P"));
    process.put("env", env.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList());
    process.put("cwd", "/");
    process.put(
        "capabilities",
        Map.of(
            "bounding", CAPABILITIES,
            "effective", CAPABILITIES,
            "permitted", CAPABILITIES));
    long nofile = HostLimits.openFilesHardLimit();
    process.put(
        "rlimits", List.of(Map.of("type", "RLIMIT_NOFILE", "soft", nofile, "hard", nofile)));
    // sudo is setuid root: it needs privileges to be gainable, so no_new_privs stays off
    process.put("noNewPrivileges", false);

    Map<String, Object> linux = new LinkedHashMap<>();
    linux.put(
        "namespaces",
        List.of(
            Map.of("type", "pid"),
            Map.of("type", "network"),
            Map.of("type", "ipc"),
            Map.of("type", "uts"),
            Map.of("type", "mount"),
            Map.of("type", "user"),
            Map.of("type", "cgroup")));
    List<Map<String, Object>> mapping =
        List.of(Map.of("containerID", 0, "hostID", hostBase, "size", Image.ID_RANGE));
    linux.put("uidMappings", mapping);
    linux.put("gidMappings", mapping);
    linux.put("cgroupsPath", cgroupsPath);
    Map<String, Object> resources = new LinkedHashMap<>();
    resources.put("memory", Map.of("limit", limits.memoryBytes(), "swap", limits.memoryBytes()));
    resources.put("cpu", Map.of("quota", 100_000L * limits.cpus(), "period", 100_000L));
    resources.put("pids", Map.of("limit", limits.pids()));
    resources.put("devices", List.of(Map.of("allow", false, "access", "rwm")));
    linux.put("resources", resources);
    linux.put(
        "maskedPaths",
        List.of(
            "/proc/acpi",
            "/proc/asound",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/proc/scsi",
            "/sys/firmware",
            "/sys/devices/virtual/powercap"));
    linux.put(
        "readonlyPaths",
        List.of("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"));
    linux.put("seccomp", SeccompProfile.DEFAULT);

    Map<String, Object> config = new LinkedHashMap<>();
    config.put("ociVersion", "1.0.2");
    config.put("process", process);
    config.put("root", Map.of("path", rootfs.toString(), "readonly", false));
    config.put("hostname", id);
    List<Map<String, Object>> mounts = mounts();
    hosts.ifPresent(
        h ->
            mounts.add(
                mount(
                    "/etc/hosts",
                    "bind",
                    h.toString(),
                    List.of("bind", "ro", "nosuid", "nodev", "noexec"))));
    tmp.ifPresent(t -> mounts.add(mount("/tmp", "bind", t.toString(), List.of("rbind", "rw"))));
    config.put("mounts", mounts);
    config.put("linux", linux);
    compiledSeccomp.ifPresent(
        bpf -> config.put("annotations", Map.of(OciRuntime.SECCOMP_BPF_ANNOTATION, bpf)));
    try {
      return JSON.writeValueAsBytes(config);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot write the OCI config", e);
    }
  }

  /**
   * The OCI process of a command exec'd into a sandbox by a runtime that takes one as a file
   * ({@code runsc exec --process}): {@code user} as {@code uid:gid}, in {@code cwd}, with exactly
   * {@code env}. As {@code crun exec} runs it: the container's capability bounding set (root keeps
   * those capabilities; another user has none until it runs {@code sudo}, which is why {@code
   * noNewPrivileges} stays off, as for the init) and its open files limit. runsc's own {@code exec}
   * flags cannot say so: it sets no_new_privs, and sudo then refuses to run.
   */
  public static byte[] execProcess(
      String user, String cwd, Map<String, String> env, List<String> argv) {
    String[] ids = user.split(":", -1);
    if (ids.length != 2 || !ids[0].matches("\\d{1,10}") || !ids[1].matches("\\d{1,10}")) {
      throw new IllegalArgumentException("not uid:gid: " + user);
    }
    long uid = Long.parseLong(ids[0]);
    List<String> held = uid == 0 ? CAPABILITIES : List.of();
    Map<String, Object> process = new LinkedHashMap<>();
    process.put("terminal", false);
    process.put("user", Map.of("uid", uid, "gid", Long.parseLong(ids[1])));
    process.put("args", argv);
    process.put("env", env.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList());
    process.put("cwd", cwd);
    process.put(
        "capabilities", Map.of("bounding", CAPABILITIES, "effective", held, "permitted", held));
    long nofile = HostLimits.openFilesHardLimit();
    process.put(
        "rlimits", List.of(Map.of("type", "RLIMIT_NOFILE", "soft", nofile, "hard", nofile)));
    process.put("noNewPrivileges", false);
    try {
      return JSON.writeValueAsBytes(process);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot write an OCI process", e);
    }
  }

  private static List<Map<String, Object>> mounts() {
    List<Map<String, Object>> mounts = new ArrayList<>();
    mounts.add(mount("/proc", "proc", "proc", List.of("nosuid", "noexec", "nodev")));
    mounts.add(
        mount(
            "/dev", "tmpfs", "tmpfs", List.of("nosuid", "strictatime", "mode=755", "size=65536k")));
    mounts.add(
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            List.of("nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620")));
    mounts.add(
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            List.of("nosuid", "noexec", "nodev", "mode=1777", "size=65536k")));
    mounts.add(mount("/dev/mqueue", "mqueue", "mqueue", List.of("nosuid", "noexec", "nodev")));
    mounts.add(mount("/sys", "sysfs", "sysfs", List.of("nosuid", "noexec", "nodev", "ro")));
    mounts.add(
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            List.of("nosuid", "noexec", "nodev", "relatime", "ro")));
    HOST_INIT.ifPresent(
        init ->
            mounts.add(
                mount(INIT, "bind", init.toString(), List.of("bind", "ro", "nosuid", "nodev"))));
    if (hasExecHelper()) {
      mounts.add(
          mount(
              EXEC_HELPER,
              "bind",
              HOST_EXEC_HELPER.toString(),
              List.of("bind", "ro", "nosuid", "nodev")));
    }
    return mounts;
  }

  private static Map<String, Object> mount(
      String destination, String type, String source, List<String> options) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("destination", destination);
    m.put("type", type);
    m.put("source", source);
    m.put("options", options);
    return m;
  }

  /**
   * The first {@code catatonit} on the usual paths and PATH that is a statically linked ELF
   * executable (one that runs in any image, whatever its libc).
   */
  private static Optional<Path> findHostInit() {
    List<String> dirs =
        new ArrayList<>(List.of("/usr/bin", "/usr/libexec/podman", "/usr/local/bin"));
    dirs.addAll(List.of(System.getenv().getOrDefault("PATH", "").split(":")));
    for (String dir : dirs) {
      if (dir.isEmpty()) {
        continue;
      }
      Path p = Path.of(dir, "catatonit");
      if (Files.isRegularFile(p) && Files.isExecutable(p) && isStaticElf(p)) {
        return Optional.of(p.toAbsolutePath());
      }
    }
    return Optional.empty();
  }

  /** A 64-bit little-endian ELF file without a PT_INTERP program header (no dynamic loader). */
  public static boolean isStaticElf(Path file) {
    try (FileChannel ch = FileChannel.open(file)) {
      ByteBuffer header = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
      if (ch.read(header, 0) < 64
          || header.getInt(0) != 0x464c457f // \x7fELF
          || header.get(4) != 2 // 64-bit
          || header.get(5) != 1) { // little-endian
        return false;
      }
      long phoff = header.getLong(0x20);
      int phentsize = Short.toUnsignedInt(header.getShort(0x36));
      int phnum = Short.toUnsignedInt(header.getShort(0x38));
      if (phentsize < 4 || phnum > 1024) {
        return false;
      }
      ByteBuffer ph = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
      for (int i = 0; i < phnum; i++) {
        ph.clear();
        if (ch.read(ph, phoff + (long) i * phentsize) < 4) {
          return false;
        }
        if (ph.getInt(0) == 3) { // PT_INTERP
          return false;
        }
      }
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * Writes {@code bundle/config.json}, not durably: every start of the sandbox writes it anew
   * before the runtime reads it, so neither a crash nor a power loss can leave one to be read.
   */
  public static void write(Path bundle, byte[] config) throws IOException {
    PrivateFiles.createPrivateDirectories(bundle);
    Path file = bundle.resolve("config.json");
    Files.deleteIfExists(file); // one written before the state directory was private
    PrivateFiles.writeNew(file, config);
  }
}
