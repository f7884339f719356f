package dev.sandbox4j.runtime.internal.linux;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Facts about the host's mounts ({@code /proc/self/mountinfo}) and kernel that the engine and
 * {@code setup}/{@code doctor} both read: where the cgroup2 hierarchy is, and whether it has {@code
 * favordynmods} (which a checkpoint or restore may clear, and the engine then puts back).
 */
public final class Mounts {
  private Mounts() {}

  private static final Path MOUNTINFO = Path.of("/proc/self/mountinfo");
  public static final Path HYBRID_UNIFIED = Path.of("/sys/fs/cgroup/unified");
  public static final Path PURE_V2 = Path.of("/sys/fs/cgroup");
  private static final Pattern KERNEL = Pattern.compile("(\\d+)\\.(\\d+).*");

  /** One line of {@code /proc/self/mountinfo}: where, what type, with which super options. */
  public record Mount(Path mountPoint, String fsType, List<String> options) {}

  /** Every mount this process sees, bottom first; empty where there is no {@code /proc}. */
  public static List<Mount> mounts() {
    List<Mount> mounts = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(MOUNTINFO)) {
        String[] halves = line.split(" - ", 2);
        String[] before = halves[0].split(" ");
        if (halves.length < 2 || before.length < 5) {
          continue;
        }
        String[] after = halves[1].split(" ");
        mounts.add(
            new Mount(
                Path.of(unescape(before[4])),
                after[0],
                after.length > 2 ? List.of(after[2].split(",")) : List.of()));
      }
    } catch (IOException | RuntimeException e) {
      // not Linux, or no /proc: every mount-based check fails
    }
    return mounts;
  }

  private static String unescape(String field) {
    Matcher m = Pattern.compile("\\\\([0-7]{3})").matcher(field);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      m.appendReplacement(
          out, Matcher.quoteReplacement(String.valueOf((char) Integer.parseInt(m.group(1), 8))));
    }
    m.appendTail(out);
    return out.toString();
  }

  /** The cgroup2 mount, preferring the standard places. */
  public static Optional<Path> unified(List<Mount> mounts) {
    List<Path> v2 =
        mounts.stream().filter(m -> m.fsType().equals("cgroup2")).map(Mount::mountPoint).toList();
    for (Path preferred : List.of(HYBRID_UNIFIED, PURE_V2)) {
      if (v2.contains(preferred)) {
        return Optional.of(preferred);
      }
    }
    return v2.stream().findFirst();
  }

  /** The major and minor version in {@code os.version} ("6.18.0-rc1": 6, 18); 0, 0 if none. */
  public static int[] kernelVersion(String osVersion) {
    Matcher m = KERNEL.matcher(osVersion == null ? "" : osVersion);
    if (!m.matches()) {
      return new int[] {0, 0};
    }
    return new int[] {Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2))};
  }

  /**
   * Whether moving a process into a cgroup is fast. Every move (crun puts a sandbox's init into its
   * cgroups, each command joins them) takes the kernel's cgroup threadgroup lock for writing, which
   * by default waits for an RCU grace period: 5-20 ms measured here, paid once per create and once
   * per command. {@code favordynmods} (Linux 6.0+, a cgroup2 mount option that applies to every
   * hierarchy, v1 included) makes such moves take well under a millisecond, for a slightly dearer
   * fork and exit. A remount must repeat the hierarchy's other options: the kernel clears any flag
   * it is not given. For the same reason any later cgroup2 mount in the host's cgroup namespace
   * without the option (another tool's setup, say) turns it off again: doctor then reports it.
   */
  public static HostCheck favorDynmods(List<Mount> mounts, String kernel) {
    String name = "cgroup favordynmods";
    Optional<Mount> v2 = unified(mounts).flatMap(at -> mountAt(mounts, at, "cgroup2"));
    if (v2.isEmpty()) {
      return HostCheck.ok(name, "no cgroup2 hierarchy to tune (see cgroup v2 above)");
    }
    int[] version = kernelVersion(kernel);
    if (version[0] < 6) {
      return HostCheck.ok(
          name,
          "not available in kernel "
              + kernel
              + " (6.0 or newer has it): each create and command waits 5-20 ms in the kernel to"
              + " move a process into its cgroup");
    }
    List<String> options = v2.get().options();
    if (options.contains("favordynmods")) {
      return HostCheck.ok(name, "cgroup2 at " + v2.get().mountPoint() + " has favordynmods");
    }
    List<String> remount = new ArrayList<>(List.of("remount"));
    options.stream().filter(o -> !o.equals("remount")).forEach(remount::add);
    remount.add("favordynmods");
    return HostCheck.missing(
        name,
        "cgroup2 at "
            + v2.get().mountPoint()
            + " lacks favordynmods: every move of a process into a cgroup (one per create, one"
            + " per command) waits 5-20 ms for an RCU grace period; the remount does not survive"
            + " a reboot, and a cgroup2 mount without the option turns it off again",
        "mount -o " + String.join(",", remount) + " " + v2.get().mountPoint());
  }

  /** Whether the cgroup2 hierarchy is mounted with {@code favordynmods} right now. */
  public static boolean favorDynmodsSet() {
    List<Mount> mounts = mounts();
    return unified(mounts)
        .flatMap(at -> mountAt(mounts, at, "cgroup2"))
        .map(m -> m.options().contains("favordynmods"))
        .orElse(false);
  }

  /**
   * Puts {@code favordynmods} back after something cleared it: CRIU mounts cgroup2 in the host's
   * cgroup namespace for a checkpoint or restore, and that mount's flags (without the option) apply
   * to the hierarchy. Called only when the option was set before, so that a host whose owner never
   * chose it is left as it was.
   */
  public static void restoreFavorDynmods() {
    HostCheck check = favorDynmods(mounts(), System.getProperty("os.version"));
    if (!check.ok()) {
      HostCommand.Result r = HostCommand.run(List.of("sh", "-c", check.fix()));
      if (!r.ok()) {
        System.getLogger(Mounts.class.getName())
            .log(
                System.Logger.Level.WARNING,
                "could not restore favordynmods on the cgroup2 hierarchy ("
                    + check.fix()
                    + "): creates and commands will be 5-20 ms slower until `sandbox4j setup`");
      }
    }
  }

  public static Optional<Mount> mountAt(List<Mount> mounts, Path at, String fsType) {
    Mount found = null;
    for (Mount m : mounts) {
      if (m.mountPoint().equals(at) && m.fsType().equals(fsType)) {
        found = m; // the last one is on top
      }
    }
    return Optional.ofNullable(found);
  }
}
