package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.HostLimits;
import dev.sandbox4j.runtime.internal.linux.Mounts;
import dev.sandbox4j.runtime.internal.net.ForwardingFirewall;
import dev.sandbox4j.runtime.internal.net.NetworkTools;
import dev.sandbox4j.runtime.internal.oci.Criu;
import dev.sandbox4j.runtime.internal.oci.FixedCrun;
import dev.sandbox4j.runtime.internal.oci.Gvisor;
import dev.sandbox4j.runtime.internal.oci.HelperBuilds;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the local engine needs from this machine ({@code sandbox4j doctor}), and the fixes it can
 * make itself ({@code sandbox4j setup}).
 *
 * <p>{@link #check} only reads: files under {@code /proc} and {@code /sys}, and the versions of
 * {@code crun}, {@code runsc} and {@code mmdebstrap}. {@link #setup} changes the host: it installs
 * Debian packages, builds CRIU ({@link Criu}) and a fixed crun with CRIU support when the installed
 * one is older than 1.9 or has none ({@link FixedCrun}), installs gVisor's runsc ({@link Gvisor}),
 * and mounts a cgroup controller, so it needs root.
 */
public final class HostSetup {

  /** What {@link #setup} installs when missing: crun runs sandboxes, mmdebstrap builds images. */
  static final List<String> PACKAGES = List.of("crun", "mmdebstrap", "catatonit");

  private static final Path FILESYSTEMS = Path.of("/proc/filesystems");
  private static final Path MAX_USER_NAMESPACES = Path.of("/proc/sys/user/max_user_namespaces");
  private static final Path HUGETLB = Path.of("/sys/fs/cgroup/hugetlb");
  private static final String HUGETLB_FIX =
      "mkdir -p " + HUGETLB + " && mount -t cgroup -o hugetlb cgroup " + HUGETLB;

  /** Characters overlayfs mount options cannot carry in a path (they separate options). */
  private static final Pattern BAD_PATH_CHAR = Pattern.compile("[,:\\\\\\s]");

  private HostSetup() {}

  /**
   * Checks every prerequisite of the local engine with state directory {@code home}, in the order a
   * reader fixes them. Does not change anything; works as any user and on any OS (on one that is
   * not Linux, most checks simply fail).
   */
  public static List<HostCheck> check(Path home) {
    Objects.requireNonNull(home, "home");
    List<Mounts.Mount> mounts = Mounts.mounts();
    List<HostCheck> checks = new ArrayList<>();
    checks.add(linux());
    checks.add(root());
    checks.add(cgroupKill(mounts));
    checks.add(overlay());
    checks.add(userNamespaces());
    checks.add(FixedCrun.check());
    checks.add(Criu.check());
    checks.addAll(HelperBuilds.checks());
    checks.add(Gvisor.check());
    checks.add(mmdebstrap());
    checks.add(hugetlb(mounts));
    checks.add(Mounts.favorDynmods(mounts, System.getProperty("os.version")));
    checks.add(openFiles());
    checks.add(NetworkTools.check());
    checks.add(ForwardingFirewall.check());
    checks.add(stateDirectory(home));
    checks.add(SandboxDisk.check(home, SandboxDisk.defaultReserve(home)));
    checks.add(defaultImage(home));
    return List.copyOf(checks);
  }

  /**
   * Performs every fix it can, telling {@code progress} what it does as it goes, then checks again:
   * installs what is missing of {@code crun}, {@code mmdebstrap} and {@code catatonit} with {@code
   * apt-get} ({@code apt-get update} first), builds CRIU (for live fork and hibernate) and crun
   * from Debian trixie's source into {@code /usr/local/libexec/sandbox4j/} if they are missing or
   * the installed crun is older than 1.9 or lacks CRIU (about a minute each, with build
   * dependencies from apt), installs Debian trixie's runsc (gVisor) there unless a runsc is found
   * (a few seconds; no build), loads overlayfs, enables user namespaces, mounts the cgroup v2
   * hierarchy and (on a hybrid cgroup v1 host) the {@code hugetlb} controller, remounts the cgroup
   * v2 hierarchy with {@code favordynmods}, lets sandboxes' packets past a DROP forwarding policy
   * (Docker's; see {@link ForwardingFirewall}), creates {@code home}, makes the ext4 template of
   * the default sandbox disk and mounts again the sandbox disks a reboot unmounted. Idempotent: on
   * a prepared host it changes nothing. Mounts do not survive a reboot; run it again after one.
   *
   * @return the checks after the fixes, as {@link #check} reports them
   * @throws WorkspaceException if this is not Linux or not root, before changing anything
   */
  public static List<HostCheck> setup(Path home, Consumer<String> progress) {
    Objects.requireNonNull(home, "home");
    Objects.requireNonNull(progress, "progress");
    requireLinuxAndRoot(System.getProperty("os.name"), SandboxHome.isRoot());

    installPackages(progress);

    // CRIU first: the crun build then links checkpoint/restore support against it
    try {
      Criu.install(progress);
    } catch (WorkspaceException e) {
      progress.accept("  failed: " + e.getMessage());
    }
    try {
      FixedCrun.install(progress);
    } catch (WorkspaceException e) {
      progress.accept("  failed: " + e.getMessage());
    }
    // optional (without the exec helper commands take the slower crun exec path, without the
    // reaper a gVisor destroy waits for the host's init): a failure is reported
    try {
      HelperBuilds.install(progress);
    } catch (WorkspaceException e) {
      progress.accept("  failed: " + e.getMessage());
    }
    // optional (gVisor isolation): a failure is reported, and doctor says what is missing
    try {
      Gvisor.install(progress);
    } catch (WorkspaceException e) {
      progress.accept("  failed: " + e.getMessage());
    }

    if (!listsOverlay()) {
      progress.accept("loading the overlay file system module: modprobe overlay");
      runAndReport(List.of("modprobe", "overlay"), progress);
    }

    if (maxUserNamespaces().orElse(1L) <= 0) {
      progress.accept("enabling user namespaces: sysctl -w user.max_user_namespaces=15000");
      runAndReport(List.of("sysctl", "-w", "user.max_user_namespaces=15000"), progress);
    }

    List<Mounts.Mount> mounts = Mounts.mounts();
    if (Mounts.unified(mounts).isEmpty()) {
      Path at = hasCgroupV1(mounts) ? Mounts.HYBRID_UNIFIED : Mounts.PURE_V2;
      progress.accept("mounting the cgroup v2 hierarchy at " + at);
      runAndReport(
          List.of("sh", "-c", "mkdir -p \"$1\" && mount -t cgroup2 cgroup2 \"$1\"", "sh", "" + at),
          progress);
      mounts = Mounts.mounts();
    }

    if (isHybrid(mounts) && !hasHugetlb(mounts)) {
      progress.accept("mounting the hugetlb cgroup controller (crun needs it): " + HUGETLB_FIX);
      runAndReport(List.of("sh", "-c", HUGETLB_FIX), progress);
    }

    mounts = Mounts.mounts();
    HostCheck dynmods = Mounts.favorDynmods(mounts, System.getProperty("os.version"));
    if (!dynmods.ok()) {
      progress.accept(
          "remounting the cgroup v2 hierarchy with favordynmods (fast cgroup moves): "
              + dynmods.fix());
      runAndReport(List.of("sh", "-c", dynmods.fix()), progress);
    }

    try {
      for (String added : ForwardingFirewall.ensureAccepted()) {
        progress.accept("letting sandboxes' packets past a DROP forwarding policy: " + added);
      }
    } catch (WorkspaceException e) {
      progress.accept("  forwarding rules: failed: " + e.getMessage());
    }

    Path dir = home.toAbsolutePath().normalize();
    if (!Files.isDirectory(dir)) {
      progress.accept("creating the state directory " + dir);
      try {
        Files.createDirectories(dir);
      } catch (IOException e) {
        progress.accept("  failed: " + e);
      }
    }
    try {
      // The default disk's template, so that the first create does not run mkfs.ext4; and the
      // disks a reboot unmounted (the engine would mount each on its sandbox's next use).
      SandboxDisk.template(dir, SandboxDisk.Limit.DEFAULT);
      int remounted = SandboxDisk.mountAll(dir);
      if (remounted > 0) {
        progress.accept("mounted the disks of " + remounted + " sandboxes again");
      }
    } catch (IOException | WorkspaceException e) {
      progress.accept("  sandbox disks: failed: " + e.getMessage());
    }
    return check(home);
  }

  /** The error setup gives before changing anything, or none. */
  static void requireLinuxAndRoot(String osName, boolean root) {
    if (!"Linux".equals(osName)) {
      throw new WorkspaceException(
          "setup needs Linux: local sandboxes are Linux containers (this is " + osName + ")");
    }
    if (!root) {
      throw new WorkspaceException(
          "setup needs root (it installs packages and mounts a cgroup controller): run it with"
              + " sudo, as root");
    }
  }

  // ---- the checks -------------------------------------------------------------------------

  private static HostCheck linux() {
    String os = System.getProperty("os.name");
    return "Linux".equals(os)
        ? HostCheck.ok("linux", "Linux " + System.getProperty("os.version"))
        : HostCheck.missing(
            "linux",
            "this is " + os + "; local sandboxes are Linux containers",
            "run sandbox4j on a Linux machine or VM");
  }

  private static HostCheck root() {
    return SandboxHome.isRoot()
        ? HostCheck.ok("root", "running as root")
        : HostCheck.missing(
            "root",
            "running as " + System.getProperty("user.name") + "; sandboxes need mounts and cgroups",
            "run as root (e.g. with sudo)");
  }

  private static HostCheck cgroupKill(List<Mounts.Mount> mounts) {
    String name = "cgroup v2 (cgroup.kill)";
    Optional<Path> unified = Mounts.unified(mounts);
    String kernel = System.getProperty("os.version");
    int[] version = Mounts.kernelVersion(kernel);
    boolean newEnough = version[0] > 5 || (version[0] == 5 && version[1] >= 14);
    if (!newEnough) {
      return HostCheck.missing(
          name,
          "kernel "
              + kernel
              + " has no cgroup.kill (5.14 or newer has): a timeout could miss processes",
          "upgrade to a Linux kernel 5.14 or newer");
    }
    if (unified.isEmpty()) {
      Path at = hasCgroupV1(mounts) ? Mounts.HYBRID_UNIFIED : Mounts.PURE_V2;
      return HostCheck.missing(
          name,
          "no cgroup2 file system is mounted; commands are killed through cgroup.kill",
          "mkdir -p " + at + " && mount -t cgroup2 cgroup2 " + at);
    }
    return HostCheck.ok(
        name,
        "kernel "
            + kernel
            + ", cgroup2 at "
            + unified.get()
            + (hasCgroupV1(mounts) ? " (hybrid with cgroup v1)" : ""));
  }

  private static HostCheck overlay() {
    return listsOverlay()
        ? HostCheck.ok("overlayfs", "listed in " + FILESYSTEMS)
        : HostCheck.missing(
            "overlayfs",
            FILESYSTEMS + " does not list overlay; a sandbox's root is an overlay mount",
            "modprobe overlay");
  }

  private static HostCheck userNamespaces() {
    String name = "user namespaces";
    Optional<Long> max = maxUserNamespaces();
    if (max.isEmpty()) {
      return HostCheck.missing(
          name,
          "cannot read " + MAX_USER_NAMESPACES + ": the kernel lacks user namespaces",
          "use a kernel built with CONFIG_USER_NS");
    }
    return max.get() > 0
        ? HostCheck.ok(name, "user.max_user_namespaces = " + max.get())
        : HostCheck.missing(
            name,
            "user.max_user_namespaces is 0; root in a sandbox must not be root outside",
            "sysctl -w user.max_user_namespaces=15000");
  }

  private static HostCheck mmdebstrap() {
    Optional<Path> mmdebstrap = executable("mmdebstrap");
    if (mmdebstrap.isEmpty()) {
      return HostCheck.missing(
          "mmdebstrap",
          "not installed; it builds the default image from Debian's archive",
          "apt-get install -y --no-install-recommends mmdebstrap");
    }
    return HostCheck.ok("mmdebstrap", mmdebstrap.get() + version(mmdebstrap.get()));
  }

  private static HostCheck hugetlb(List<Mounts.Mount> mounts) {
    String name = "hugetlb cgroup";
    if (!isHybrid(mounts)) {
      return HostCheck.ok(name, "not needed: no cgroup v1 memory hierarchy is mounted");
    }
    if (hasHugetlb(mounts)) {
      return HostCheck.ok(name, "mounted at " + HUGETLB + " (hybrid cgroup v1 host)");
    }
    return HostCheck.missing(
        name,
        "this host mixes cgroup v1 and v2, and crun 1.8 refuses to start (\"cgroups in hybrid"
            + " mode not supported\") until the hugetlb controller is mounted at "
            + HUGETLB
            + "; the mount does not survive a reboot",
        HUGETLB_FIX);
  }

  private static HostCheck openFiles() {
    long hard = HostLimits.openFilesHardLimit();
    boolean canRaise = hasCapability(CAP_SYS_RESOURCE);
    return HostCheck.ok(
        "open files limit",
        "hard RLIMIT_NOFILE is "
            + hard
            + ": a sandbox's processes get at most that"
            + (canRaise ? "" : " (root here lacks CAP_SYS_RESOURCE, so it cannot be raised)"));
  }

  /** The state directory check: writable (or creatable), and a path overlayfs can take. */
  static HostCheck stateDirectory(Path home) {
    String name = "state directory";
    Path dir = home.toAbsolutePath().normalize();
    List<String> paths = new ArrayList<>(List.of(dir.toString()));
    try {
      if (Files.exists(dir)) {
        paths.add(dir.toRealPath().toString());
      }
    } catch (IOException e) {
      // reported below as not writable
    }
    for (String p : paths) {
      Matcher bad = BAD_PATH_CHAR.matcher(p);
      if (bad.find()) {
        return HostCheck.missing(
            name,
            p
                + " contains "
                + describe(bad.group().charAt(0))
                + ", which overlayfs mount options cannot carry (they separate options and"
                + " layers)",
            "set SANDBOX4J_HOME to a path without ',', ':', '\\' or whitespace, e.g. "
                + LocalSandbox.DEFAULT_HOME);
      }
    }
    if (Files.isDirectory(dir)) {
      return Files.isWritable(dir)
          ? HostCheck.ok(name, dir + " is writable")
          : HostCheck.missing(
              name, dir + " is not writable", "run as root, or set SANDBOX4J_HOME elsewhere");
    }
    if (Files.exists(dir)) {
      return HostCheck.missing(
          name, dir + " exists but is not a directory", "remove it, or set SANDBOX4J_HOME");
    }
    Path parent = dir.getParent();
    while (parent != null && !Files.exists(parent)) {
      parent = parent.getParent();
    }
    if (parent != null && Files.isDirectory(parent) && Files.isWritable(parent)) {
      return HostCheck.ok(name, dir + " does not exist yet; it is created on first use");
    }
    return HostCheck.missing(
        name,
        dir + " does not exist and cannot be created here",
        "mkdir -p " + dir + " (as root), or set SANDBOX4J_HOME to a writable directory");
  }

  private static HostCheck defaultImage(Path home) {
    String name = "default image";
    Path dir = home.toAbsolutePath().normalize().resolve("images");
    try {
      Optional<Image> image = new ImageStore(dir).find(ImageStore.DEFAULT);
      if (image.isEmpty()) {
        return HostCheck.ok(
            name,
            "not built yet: the first sandbox builds it (about a minute), or run `sandbox4j image"
                + " build`");
      }
      return HostCheck.ok(
          name,
          "built "
              + image.get().created()
              + ", "
              + image.get().sizeBytes() / (1024 * 1024)
              + " MiB");
    } catch (WorkspaceException e) {
      return HostCheck.missing(name, e.getMessage(), "sandbox4j image build --rebuild");
    }
  }

  // ---- setup steps --------------------------------------------------------------------------

  private static void installPackages(Consumer<String> progress) {
    List<String> missing = new ArrayList<>();
    for (String p : PACKAGES) {
      if (executable(p).isEmpty()) {
        missing.add(p);
      }
    }
    missing.addAll(NetworkTools.missingPackages());
    if (missing.isEmpty()) {
      progress.accept("packages: " + String.join(", ", PACKAGES) + " are installed");
      return;
    }
    if (executable("apt-get").isEmpty()) {
      progress.accept(
          "cannot install "
              + String.join(", ", missing)
              + ": there is no apt-get here; install them with this system's package manager");
      return;
    }
    progress.accept("installing " + String.join(", ", missing) + " (Debian packages)");
    progress.accept("$ apt-get update");
    if (stream(List.of("apt-get", "update", "-q"), progress) != 0) {
      progress.accept("  apt-get update failed; trying to install from the current package lists");
    }
    List<String> install = HostCommand.aptInstall(missing);
    progress.accept("$ apt-get install -y --no-install-recommends " + String.join(" ", missing));
    int exit = stream(install, progress);
    if (exit != 0) {
      progress.accept("  apt-get install failed (exit " + exit + ")");
    }
  }

  /** Runs a fix; says so if it failed (the checks afterwards report what is still missing). */
  private static void runAndReport(List<String> argv, Consumer<String> progress) {
    int exit = stream(argv, progress);
    if (exit != 0) {
      progress.accept("  failed (exit " + exit + ")");
    }
  }

  /** Runs {@code argv} with stdin at EOF, each output line to {@code progress}; the exit code. */
  private static int stream(List<String> argv, Consumer<String> progress) {
    return HostCommand.stream(argv, null, progress);
  }

  // ---- facts about the host -----------------------------------------------------------------

  private static boolean hasCgroupV1(List<Mounts.Mount> mounts) {
    return mounts.stream().anyMatch(m -> m.fsType().equals("cgroup"));
  }

  /** Hybrid: a cgroup v1 memory hierarchy is mounted, so crun works in v1 mode. */
  private static boolean isHybrid(List<Mounts.Mount> mounts) {
    return mounts.stream()
        .anyMatch(m -> m.fsType().equals("cgroup") && m.options().contains("memory"));
  }

  private static boolean hasHugetlb(List<Mounts.Mount> mounts) {
    return mounts.stream()
        .anyMatch(
            m ->
                m.fsType().equals("cgroup")
                    && m.mountPoint().equals(HUGETLB)
                    && m.options().contains("hugetlb"));
  }

  private static boolean listsOverlay() {
    try {
      return Files.readAllLines(FILESYSTEMS).stream()
          .map(String::strip)
          .anyMatch(l -> l.equals("overlay") || l.endsWith("\toverlay") || l.endsWith(" overlay"));
    } catch (IOException e) {
      return false;
    }
  }

  private static Optional<Long> maxUserNamespaces() {
    try {
      // Not Files.readString: with a file size of 0 it reads one byte first, and a sysctl file
      // answers any read past offset 0 with end-of-file ("96365" would read as "9").
      return Optional.of(
          Long.parseLong(Files.readAllLines(MAX_USER_NAMESPACES).getFirst().strip()));
    } catch (IOException | RuntimeException e) {
      return Optional.empty();
    }
  }

  private static final int CAP_SYS_RESOURCE = 24;

  private static boolean hasCapability(int capability) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("CapBnd:")) {
          long mask = Long.parseUnsignedLong(line.substring("CapBnd:".length()).strip(), 16);
          return (mask & (1L << capability)) != 0;
        }
      }
    } catch (IOException | RuntimeException e) {
      // unknown: assume the usual
    }
    return true;
  }

  /** An executable called {@code name} on PATH or in the usual system directories. */
  private static Optional<Path> executable(String name) {
    return OciRuntime.find(name).filter(Files::isRegularFile);
  }

  /** ", version X" from {@code program --version}'s first line, or nothing. */
  private static String version(Path program) {
    try {
      HostCommand.Result r = HostCommand.run(List.of(program.toString(), "--version"));
      String first = r.output().lines().findFirst().orElse("").strip();
      return r.ok() && !first.isEmpty() ? " (" + first + ")" : "";
    } catch (RuntimeException e) {
      return "";
    }
  }

  private static String describe(char c) {
    return switch (c) {
      case ',' -> "a comma";
      case ':' -> "a colon";
      case '\\' -> "a backslash";
      default -> String.format(Locale.ROOT, "whitespace (U+%04X)", (int) c);
    };
  }
}
