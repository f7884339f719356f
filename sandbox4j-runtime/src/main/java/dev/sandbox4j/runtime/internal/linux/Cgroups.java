package dev.sandbox4j.runtime.internal.linux;

import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The cgroups of sandboxes and of their commands.
 *
 * <p>A sandbox's cgroup is {@code /sandbox4j/<id>} in every hierarchy (crun creates it and applies
 * the limits). Each command gets a child cgroup {@code cmd-<random>} in the cgroup v2 hierarchy,
 * through {@code crun exec --cgroup}, so that {@code cgroup.kill} ends every process it started,
 * including those that called {@code setsid} or daemonized: a process cannot leave its cgroup. On a
 * hybrid host (cgroup v1 controllers plus a v2 hierarchy without controllers) crun puts a
 * sub-cgroup exec only into the v2 hierarchy, so the process that starts {@code crun exec} first
 * joins the sandbox's v1 cgroups itself; its children inherit them, and the limits hold.
 *
 * <p>The parent cgroup ({@link #parentFor}) holds every sandbox of one state directory and has
 * limits of its own ({@link HostLimits.Sandboxes}: memory, processes, CPU weight), so that however
 * many sandboxes there are, and whatever each one's own limits say, together they leave the host
 * its memory, its process table and the CPU it wants. {@link #ensureParent} creates it and writes
 * them before every container start (create, start after stop or reboot, restore for a fork or a
 * wake), so no sandbox ever runs under a parent without them: crun would create a missing parent as
 * a plain directory.
 */
public final class Cgroups {
  /** The parent cgroup of the sandboxes of the default state directory. */
  static final String PARENT = "sandbox4j";

  private static final SecureRandom RANDOM = new SecureRandom();
  private static final long KILL_WAIT_MILLIS = 10_000;

  private static final System.Logger LOG = System.getLogger(Cgroups.class.getName());

  private final String parent;
  private final Path unified;
  private final List<Path> v1Hierarchies;
  private final HostLimits.Sandboxes limits;

  private Cgroups(
      String parent, Path unified, List<Path> v1Hierarchies, HostLimits.Sandboxes limits) {
    this.parent = parent;
    this.unified = unified;
    this.v1Hierarchies = v1Hierarchies;
    this.limits = limits;
  }

  /** The same hierarchies, whose parent cgroup gets {@code limits} instead. */
  public Cgroups withLimits(HostLimits.Sandboxes limits) {
    return new Cgroups(parent, unified, v1Hierarchies, limits);
  }

  /** The limits of the parent cgroup of all sandboxes. */
  HostLimits.Sandboxes limits() {
    return limits;
  }

  /**
   * The parent cgroup of the sandboxes of state directory {@code home}: {@value #PARENT} for the
   * default one, {@code sandbox4j-<hash>} for any other, so that gc in one state directory never
   * touches the cgroups of another's sandboxes.
   */
  public static String parentFor(Path home) {
    if (home.equals(SandboxHome.DEFAULT)) {
      return PARENT;
    }
    return PARENT
        + "-"
        + Integer.toHexString(home.toAbsolutePath().normalize().toString().hashCode());
  }

  /**
   * The hierarchies mounted on this host, read from {@code /proc/self/mountinfo}, for sandboxes
   * under the parent cgroup {@code parent}.
   */
  public static Cgroups detect(String parent) {
    return detect(parent, Path.of("/proc/self/mountinfo"));
  }

  /** As {@link #detect(String)}, from a mountinfo file (a test's). */
  public static Cgroups detect(String parent, Path mountinfo) {
    List<Path> unified = new ArrayList<>();
    List<Path> v1 = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(mountinfo)) {
        String[] halves = line.split(" - ", 2);
        if (halves.length < 2) {
          continue;
        }
        String fsType = halves[1].split(" ")[0];
        Path mountPoint = Path.of(halves[0].split(" ")[4]);
        if (fsType.equals("cgroup2")) {
          unified.add(mountPoint);
        } else if (fsType.equals("cgroup")) {
          v1.add(mountPoint);
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + mountinfo + ": " + e, e);
    }
    // The host's own hierarchies, where it has them: CRIU mounts the same ones again, briefly, in
    // a temporary "cgyard" while it restores a process (another sandbox's fork or hibernate, maybe
    // of another engine home); a path taken from there is gone a moment later.
    List<Path> hostUnified = underCgroupRoot(unified);
    List<Path> hostV1 = underCgroupRoot(v1);
    return new Cgroups(
        parent,
        hostUnified.isEmpty() ? null : hostUnified.getFirst(),
        List.copyOf(hostV1),
        HostLimits.sandboxes());
  }

  private static final Path CGROUP_ROOT = Path.of("/sys/fs/cgroup");

  /** The mounts under /sys/fs/cgroup, or all of them if none is there (an unusual host). */
  private static List<Path> underCgroupRoot(List<Path> mounts) {
    List<Path> under = mounts.stream().filter(p -> p.startsWith(CGROUP_ROOT)).toList();
    return under.isEmpty() ? mounts : under;
  }

  /**
   * Creates the parent cgroup of the sandboxes where it is missing and gives it {@link #limits}, in
   * every hierarchy that has the controller: cgroup v1 {@code memory} ({@code
   * memory.limit_in_bytes}, {@code memory.memsw.limit_in_bytes} where swap is accounted, the OOM
   * killer on), {@code pids} ({@code pids.max}) and {@code cpu} ({@code cpu.shares}); cgroup v2
   * {@code memory.max}, {@code memory.swap.max} (0: like each sandbox, the parent never swaps),
   * {@code pids.max} and {@code cpu.weight} where the parent has those controllers. Idempotent and
   * crash-safe: a file already holding the value is not written again, and a crash midway leaves
   * what the next call finishes. Limits below what the sandboxes use right now (a memory limit the
   * kernel cannot reclaim down to) are logged, not fatal: the processes and pids limits still
   * apply, and the next start tries again.
   *
   * @throws WorkspaceException if the parent cannot be created or a limit cannot be written at all
   */
  public void ensureParent() {
    for (Path h : v1Hierarchies) {
      Path dir = h.resolve(parent);
      boolean memory = Files.exists(h.resolve("memory.limit_in_bytes"));
      // the root of the pids hierarchy has no pids.max: known by its name (pids, or a combination)
      boolean pids =
          java.util.Arrays.asList(h.getFileName().toString().split(",")).contains("pids");
      boolean cpu = Files.exists(h.resolve("cpu.shares"));
      if (!memory && !pids && !cpu) {
        continue; // crun makes the parent in the other hierarchies (cpuset needs its copying)
      }
      mkdir(dir);
      if (memory) {
        writeMemoryV1(dir);
        Path oom = dir.resolve("memory.oom_control");
        if (!readOr(oom, "").startsWith("oom_kill_disable 0")) {
          write(oom, "0", true); // the OOM killer on: a limit reached kills inside, never hangs
        }
      }
      if (Files.exists(dir.resolve("pids.max"))) {
        write(dir.resolve("pids.max"), Long.toString(limits.pids()), false);
      }
      if (cpu) {
        write(dir.resolve("cpu.shares"), Integer.toString(limits.cpuShares()), false);
      }
    }
    if (unified != null) {
      Path dir = unified.resolve(parent);
      mkdir(dir);
      String controllers = readOr(dir.resolve("cgroup.controllers"), "");
      if (controllers.contains("memory")) {
        write(dir.resolve("memory.max"), Long.toString(limits.memoryBytes()), true);
        if (Files.exists(dir.resolve("memory.swap.max"))) {
          write(dir.resolve("memory.swap.max"), "0", true);
        }
      }
      if (controllers.contains("pids")) {
        write(dir.resolve("pids.max"), Long.toString(limits.pids()), false);
      }
      if (controllers.contains("cpu")) {
        write(dir.resolve("cpu.weight"), Integer.toString(limits.cpuWeight()), false);
      }
    }
  }

  /**
   * v1 memory and memory+swap: memsw must stay at least the memory limit, so which is written first
   * depends on whether the limit goes up or down.
   */
  private void writeMemoryV1(Path dir) {
    String limit = Long.toString(limits.memoryBytes());
    Path memsw = dir.resolve("memory.memsw.limit_in_bytes");
    if (!Files.exists(memsw)) {
      write(dir.resolve("memory.limit_in_bytes"), limit, true);
      return;
    }
    long current = parseOr(readOr(dir.resolve("memory.limit_in_bytes"), ""), Long.MAX_VALUE);
    if (limits.memoryBytes() > current) {
      write(memsw, limit, true);
      write(dir.resolve("memory.limit_in_bytes"), limit, true);
    } else {
      write(dir.resolve("memory.limit_in_bytes"), limit, true);
      write(memsw, limit, true);
    }
  }

  private static void mkdir(Path dir) {
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot create the sandboxes' parent cgroup " + dir + ": " + e, e);
    }
  }

  /**
   * Writes {@code value} unless the file holds it already. A refused write fails, unless {@code
   * mayBeBusy}: a memory limit below current use (EBUSY) is logged and left for the next start.
   */
  private static void write(Path file, String value, boolean mayBeBusy) {
    if (readOr(file, "").strip().equals(value)) {
      return;
    }
    try {
      Files.writeString(file, value);
    } catch (IOException e) {
      if (!mayBeBusy) {
        throw new WorkspaceException(
            "cannot limit the sandboxes' parent cgroup: writing "
                + value
                + " to "
                + file
                + ": "
                + e,
            e);
      }
      LOG.log(
          System.Logger.Level.WARNING,
          "cannot write " + value + " to " + file + " (the sandboxes use more right now?): " + e);
    }
  }

  private static String readOr(Path file, String fallback) {
    try {
      return Files.readString(file);
    } catch (IOException e) {
      return fallback;
    }
  }

  private static long parseOr(String text, long fallback) {
    try {
      return Long.parseLong(text.strip());
    } catch (NumberFormatException e) {
      return fallback;
    }
  }

  /**
   * The parent cgroup's directory in the v1 hierarchy of {@code controller} (its mount point's name
   * contains it), else in the v2 hierarchy: for reading its limits and use.
   */
  Path parentDir(String controller) {
    for (Path h : v1Hierarchies) {
      if (java.util.Arrays.asList(h.getFileName().toString().split(",")).contains(controller)) {
        return h.resolve(parent);
      }
    }
    if (unified == null) {
      throw new WorkspaceException("no cgroup hierarchy is mounted for " + controller);
    }
    return unified.resolve(parent);
  }

  /** The cgroupsPath crun gets for sandbox {@code id}. */
  public String pathOf(String id) {
    return "/" + parent + "/" + id;
  }

  /** The {@code cgroup.procs} files of the sandbox's v1 cgroups that a command must join. */
  public List<String> v1ProcsFiles(String id) {
    List<String> files = new ArrayList<>();
    for (Path h : v1Hierarchies) {
      Path procs = h.resolve(parent).resolve(id).resolve("cgroup.procs");
      if (Files.exists(procs)) {
        files.add(procs.toString());
      }
    }
    return files;
  }

  /**
   * How many more processes the sandbox may start, from its pids controller, or {@link
   * Long#MAX_VALUE} if there is no limit to read.
   */
  public long pidsHeadroom(String id) {
    List<Path> candidates = new ArrayList<>();
    for (Path h : v1Hierarchies) {
      candidates.add(h.resolve(parent).resolve(id));
    }
    if (unified != null) {
      candidates.add(unified.resolve(parent).resolve(id));
    }
    for (Path dir : candidates) {
      Path max = dir.resolve("pids.max");
      Path current = dir.resolve("pids.current");
      if (Files.exists(max) && Files.exists(current)) {
        try {
          String limit = Files.readString(max).strip();
          if (limit.equals("max")) {
            return Long.MAX_VALUE;
          }
          return Long.parseLong(limit) - Long.parseLong(Files.readString(current).strip());
        } catch (IOException | NumberFormatException e) {
          return Long.MAX_VALUE; // the sandbox is going away; the exec will say so
        }
      }
    }
    return Long.MAX_VALUE;
  }

  /** Creates a fresh command cgroup; returns its name relative to the sandbox's cgroup. */
  public String newCommandGroup(String id) {
    if (unified == null) {
      throw new WorkspaceException("no cgroup v2 hierarchy is mounted: run `sandbox4j doctor`");
    }
    String name = "cmd-" + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    try {
      // createDirectory, not createDirectories: the sandbox's own cgroup is crun's, and if it is
      // gone (the sandbox was destroyed), a command must fail, not recreate it.
      Files.createDirectory(unified.resolve(parent).resolve(id).resolve(name));
    } catch (IOException e) {
      throw new WorkspaceException("cannot create a cgroup for the command: " + e, e);
    }
    return name;
  }

  /** The {@code cgroup.procs} file of command cgroup {@code group} of the sandbox (cgroup v2). */
  public String commandProcsFile(String id, String group) {
    return unified.resolve(parent).resolve(id).resolve(group).resolve("cgroup.procs").toString();
  }

  /**
   * Sends the kill to every process in the command's cgroup without waiting for them to end (a
   * frozen v1 freezer holds them until thawed). Quietly does nothing if the cgroup is gone.
   */
  public void startKill(String id, String group) {
    try {
      Files.writeString(
          unified.resolve(parent).resolve(id).resolve(group).resolve("cgroup.kill"), "1");
    } catch (IOException gone) {
      // gone with its processes, or the JVM is on its way out: the sandbox's destroy cleans up
    }
  }

  /**
   * Kills every process in the command's cgroup and waits until they are gone. An interrupt (a
   * second cancellation) does not cut the wait short; it is kept for the caller. A failure other
   * than the cgroup being gone is logged, not taken for "nothing left".
   */
  public void killCommand(String id, String group) {
    Path dir = unified.resolve(parent).resolve(id).resolve(group);
    boolean interrupted = Thread.interrupted();
    try {
      Files.writeString(dir.resolve("cgroup.kill"), "1");
      long end = System.currentTimeMillis() + KILL_WAIT_MILLIS;
      while (isPopulated(dir) && System.currentTimeMillis() < end) {
        try {
          Thread.sleep(1);
        } catch (InterruptedException e) {
          interrupted = true; // a second cancellation: the kill is under way, see it through
        }
      }
    } catch (NoSuchFileException e) {
      // the cgroup is gone: so are its processes
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "cannot kill command cgroup " + dir + ": " + e);
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Freezes ({@code true}) or thaws the command's cgroup (the cgroup v2 {@code cgroup.freeze}): a
   * process in it, or moved into it later, runs no further instruction until thawed, but a kill
   * still ends it. Quietly does nothing if the cgroup is gone.
   */
  public void freezeCommand(String id, String group, boolean frozen) {
    Path file = unified.resolve(parent).resolve(id).resolve(group).resolve("cgroup.freeze");
    try {
      Files.writeString(file, frozen ? "1" : "0");
    } catch (NoSuchFileException e) {
      // the cgroup is gone: so are its processes
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "cannot write " + file + ": " + e);
    }
  }

  /**
   * Removes the command's cgroup once nothing runs in it. The command's exit code can arrive while
   * the process that reported it is still exiting there, so a busy group is tried again for a few
   * milliseconds, then, if it lists no process (the kernel is still letting go of one that ended),
   * in the background a few times over several seconds. (Left alone, every such race left an empty
   * cgroup behind: about one command in ten through the exec helper.) One that a background process
   * of the command keeps goes with the sandbox's destroy, never in the background: a hibernate
   * kills that process and the restore puts it back into the same group, so a background removal in
   * between made the restore fail (CRIU: "Can't move ... into .../cmd-...: No such file").
   */
  public void removeCommandGroup(String id, String group) {
    removeCommandGroup(id, group, false);
  }

  /**
   * {@link #removeCommandGroup} of a group whose processes this engine has just killed ({@link
   * #killCommand}, {@link #startKill}): tried again in the background while they are still listed
   * (they are on their way out, and no restore puts them back).
   */
  public void removeKilledCommandGroup(String id, String group) {
    removeCommandGroup(id, group, true);
  }

  private void removeCommandGroup(String id, String group, boolean killed) {
    if (unified == null) {
      return;
    }
    Path dir = unified.resolve(parent).resolve(id).resolve(group);
    long end = System.nanoTime() + REMOVAL_SETTLE_NANOS;
    while (!removed(dir)) {
      if (System.nanoTime() > end) {
        if (killed || !listsProcesses(dir)) {
          removeLater(dir, 0, killed);
        }
        return;
      }
      Thread.onSpinWait();
      java.util.concurrent.locks.LockSupport.parkNanos(200_000);
    }
  }

  /** How long {@link #removeCommandGroup} tries at once. */
  private static final long REMOVAL_SETTLE_NANOS = 5_000_000;

  /** When it tries again after that, in milliseconds after the previous try. */
  private static final long[] LATER_REMOVALS = {50, 500, 5_000};

  private static final java.util.concurrent.ScheduledExecutorService REMOVER =
      java.util.concurrent.Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "sandbox4j-cgroup-removal");
            t.setDaemon(true);
            return t;
          });

  private static void removeLater(Path dir, int attempt, boolean killed) {
    if (attempt >= LATER_REMOVALS.length) {
      return; // a background process still runs in it; the sandbox's destroy removes it
    }
    REMOVER.schedule(
        () -> {
          if (!removed(dir) && (killed || !listsProcesses(dir))) {
            removeLater(dir, attempt + 1, killed);
          }
        },
        LATER_REMOVALS[attempt],
        java.util.concurrent.TimeUnit.MILLISECONDS);
  }

  /** Whether cgroup {@code dir}'s {@code cgroup.procs} lists a process (an unreadable one: yes). */
  private static boolean listsProcesses(Path dir) {
    try {
      return !Files.readString(dir.resolve("cgroup.procs")).isBlank();
    } catch (NoSuchFileException gone) {
      return false;
    } catch (IOException e) {
      return true;
    }
  }

  /** Whether {@code dir} is gone now (removed, or never there); false while processes are in it. */
  private static boolean removed(Path dir) {
    try {
      Files.deleteIfExists(dir);
      return true;
    } catch (IOException busy) {
      return false;
    }
  }

  /**
   * Puts the sandbox's processes into its cgroup v2 group too, where only its v1 groups hold them:
   * on a hybrid host, runsc (unlike crun) joins the v1 hierarchies only, and the engine reads a
   * sandbox's processes, whether one is runnable and its CPU time from the v2 group ({@link #pids},
   * {@link #anyRunnable}, {@link #cpuUsageMicros}); the v2 parent's limits of all sandboxes
   * together then hold for it too. Twice: a process forked before its parent moved stays where it
   * was. Nothing to do without a v2 hierarchy.
   */
  public void joinUnified(String id) {
    if (unified == null) {
      return;
    }
    Path dir = unified.resolve(parent).resolve(id);
    mkdir(dir);
    for (int round = 0; round < 2; round++) {
      for (Path h : v1Hierarchies) {
        Path procs = h.resolve(parent).resolve(id).resolve("cgroup.procs");
        if (!Files.exists(procs)) {
          continue;
        }
        for (String pid : readOr(procs, "").split("\\s+")) {
          if (!pid.isBlank()) {
            try {
              Files.writeString(dir.resolve("cgroup.procs"), pid.strip());
            } catch (IOException e) {
              // exited meanwhile: nothing to move
            }
          }
        }
        break; // every v1 hierarchy holds the same processes
      }
    }
  }

  /** Removes every cgroup directory of the sandbox that crun did not remove itself. */
  public void removeSandbox(String id) {
    List<Path> roots = new ArrayList<>(v1Hierarchies);
    if (unified != null) {
      roots.add(unified);
    }
    for (Path root : roots) {
      Path dir = root.resolve(parent).resolve(id);
      if (!Files.isDirectory(dir)) {
        continue;
      }
      try (Stream<Path> children = Files.list(dir)) {
        for (Path child : children.filter(Files::isDirectory).toList()) {
          if (Files.exists(child.resolve("cgroup.kill"))) {
            Files.writeString(child.resolve("cgroup.kill"), "1");
          }
          rmdirWhenEmpty(child);
        }
        rmdirWhenEmpty(dir);
      } catch (IOException e) {
        // left for `sandbox4j gc`
      }
    }
  }

  /**
   * The file that freezes the sandbox's processes: the v1 {@code freezer.state} where a freezer
   * hierarchy is mounted (as on a hybrid host; {@code crun pause} uses it too, and commands join it
   * with the other v1 cgroups), else the v2 {@code cgroup.freeze}. Empty if neither exists (the
   * sandbox's container is not running).
   */
  java.util.Optional<Path> freezerFile(String id) {
    for (Path h : v1Hierarchies) {
      Path state = h.resolve(parent).resolve(id).resolve("freezer.state");
      if (Files.exists(state)) {
        return java.util.Optional.of(state);
      }
    }
    if (unified != null) {
      Path freeze = unified.resolve(parent).resolve(id).resolve("cgroup.freeze");
      if (Files.exists(freeze)) {
        return java.util.Optional.of(freeze);
      }
    }
    return java.util.Optional.empty();
  }

  /** The pids of every process of the sandbox: its cgroup v2 tree (its own and its commands'). */
  public List<Long> pids(String id) {
    List<Long> pids = new ArrayList<>();
    if (unified == null) {
      return pids;
    }
    try (Stream<Path> dirs = Files.walk(unified.resolve(parent).resolve(id))) {
      for (Path dir : dirs.filter(Files::isDirectory).toList()) {
        try {
          for (String line : Files.readAllLines(dir.resolve("cgroup.procs"))) {
            if (!line.isBlank()) {
              pids.add(Long.parseLong(line.strip()));
            }
          }
        } catch (IOException | NumberFormatException e) {
          // removed meanwhile
        }
      }
    } catch (IOException | java.io.UncheckedIOException e) {
      // no cgroup: no processes
    }
    return pids;
  }

  /**
   * Whether a process of the sandbox is runnable right now (state {@code R} in {@code
   * /proc/PID/stat}: running, or waiting for a CPU), however little CPU it is given; false where
   * its processes cannot be listed ({@link #pids}).
   */
  public boolean anyRunnable(String id) {
    return anyRunnable(pids(id));
  }

  /**
   * Whether a process in the cgroup of host process {@code pid} (a Docker container's init: the
   * container's cgroup, its execs' processes included) is runnable right now, as {@link
   * #anyRunnable(String)} asks of a sandbox; false when it is gone or its cgroup is unreadable.
   */
  public boolean anyRunnableInGroupOf(long pid) {
    List<String> lines;
    try {
      lines = Files.readAllLines(Path.of("/proc/" + pid + "/cgroup"));
    } catch (IOException e) {
      return false;
    }
    List<Path> groups = new ArrayList<>();
    for (String line : lines) {
      String[] f = line.split(":", 3);
      if (f.length != 3) {
        continue;
      }
      if (f[1].isEmpty() && f[0].equals("0") && unified != null) {
        groups.add(unified.resolve(f[2].substring(1)));
      } else {
        for (Path h : v1Hierarchies) {
          groups.add(h.resolve(f[2].substring(1)));
        }
      }
    }
    for (Path group : groups) {
      List<Long> pids = new ArrayList<>();
      try {
        for (String line : Files.readAllLines(group.resolve("cgroup.procs"))) {
          if (!line.isBlank()) {
            pids.add(Long.parseLong(line.strip()));
          }
        }
      } catch (IOException | NumberFormatException notThisHierarchy) {
        continue;
      }
      if (pids.contains(pid)) { // the group it is in, not a namesake in another hierarchy
        return anyRunnable(pids);
      }
    }
    return false;
  }

  private static boolean anyRunnable(List<Long> pids) {
    for (long pid : pids) {
      try {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        int close = stat.lastIndexOf(')'); // the command name may hold spaces and parentheses
        if (close > 0 && close + 2 < stat.length() && stat.charAt(close + 2) == 'R') {
          return true;
        }
      } catch (IOException e) {
        // exited meanwhile
      }
    }
    return false;
  }

  /** The ids that have a cgroup directory somewhere, for gc. */
  public List<String> sandboxIds() {
    List<String> ids = new ArrayList<>();
    List<Path> roots = new ArrayList<>(v1Hierarchies);
    if (unified != null) {
      roots.add(unified);
    }
    for (Path root : roots) {
      Path sandboxes = root.resolve(parent);
      if (Files.isDirectory(sandboxes)) {
        try (Stream<Path> children = Files.list(sandboxes)) {
          children
              .filter(Files::isDirectory)
              .map(p -> p.getFileName().toString())
              .filter(n -> !ids.contains(n))
              .forEach(ids::add);
        } catch (IOException e) {
          // nothing to report
        }
      }
    }
    return ids;
  }

  /**
   * The CPU time the sandbox's processes (its commands' included) have used, in microseconds: the
   * cgroup v2 {@code cpu.stat} (kept whether or not the cpu controller is enabled), else the v1
   * {@code cpuacct.usage}; empty if neither can be read (the container is not running).
   */
  public java.util.OptionalLong cpuUsageMicros(String id) {
    if (unified != null) {
      try {
        for (String line :
            Files.readAllLines(unified.resolve(parent).resolve(id).resolve("cpu.stat"))) {
          if (line.startsWith("usage_usec ")) {
            return java.util.OptionalLong.of(Long.parseLong(line.substring(11).strip()));
          }
        }
      } catch (IOException | NumberFormatException e) {
        // try v1
      }
    }
    for (Path h : v1Hierarchies) {
      Path usage = h.resolve(parent).resolve(id).resolve("cpuacct.usage");
      if (Files.exists(usage)) {
        try {
          return java.util.OptionalLong.of(Long.parseLong(Files.readString(usage).strip()) / 1000);
        } catch (IOException | NumberFormatException e) {
          return java.util.OptionalLong.empty();
        }
      }
    }
    return java.util.OptionalLong.empty();
  }

  /**
   * The CPU time used by the cgroup of host process {@code pid} (a container's init: a Docker
   * container's cgroup, wherever its daemon's cgroup driver put it), in microseconds: its v1 {@code
   * cpuacct.usage} under whichever hierarchy has that controller, else its v2 {@code cpu.stat};
   * empty if the process is gone or neither can be read.
   */
  public java.util.OptionalLong cpuUsageMicrosOfProcess(long pid) {
    List<String> lines;
    try {
      lines = Files.readAllLines(Path.of("/proc/" + pid + "/cgroup"));
    } catch (IOException e) {
      return java.util.OptionalLong.empty();
    }
    for (String line : lines) {
      String[] f = line.split(":", 3);
      if (f.length == 3 && List.of(f[1].split(",")).contains("cpuacct")) {
        for (Path h : v1Hierarchies) {
          Path usage = h.resolve(f[2].substring(1)).resolve("cpuacct.usage");
          if (Files.exists(usage)) {
            try {
              return java.util.OptionalLong.of(
                  Long.parseLong(Files.readString(usage).strip()) / 1000);
            } catch (IOException | NumberFormatException e) {
              return java.util.OptionalLong.empty();
            }
          }
        }
      }
    }
    for (String line : lines) {
      if (line.startsWith("0::") && unified != null) {
        try {
          for (String stat :
              Files.readAllLines(unified.resolve(line.substring(4)).resolve("cpu.stat"))) {
            if (stat.startsWith("usage_usec ")) {
              return java.util.OptionalLong.of(Long.parseLong(stat.substring(11).strip()));
            }
          }
        } catch (IOException | NumberFormatException e) {
          // gone meanwhile
        }
      }
    }
    return java.util.OptionalLong.empty();
  }

  /** Whether command cgroup {@code group} of the sandbox exists and has a process in it. */
  public boolean isCommandRunning(String id, String group) {
    if (unified == null) {
      return false;
    }
    try {
      return isPopulated(unified.resolve(parent).resolve(id).resolve(group));
    } catch (IOException e) {
      return false;
    }
  }

  private static void rmdirWhenEmpty(Path dir) throws IOException {
    long end = System.currentTimeMillis() + KILL_WAIT_MILLIS;
    while (true) {
      try {
        Files.deleteIfExists(dir);
        return;
      } catch (IOException busy) {
        if (System.currentTimeMillis() > end) {
          throw busy;
        }
        try {
          Thread.sleep(5);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw busy;
        }
      }
    }
  }

  private static boolean isPopulated(Path dir) throws IOException {
    Path events = dir.resolve("cgroup.events");
    if (Files.exists(events)) {
      return Files.readString(events).contains("populated 1");
    }
    return !Files.readString(dir.resolve("cgroup.procs")).isBlank();
  }
}
