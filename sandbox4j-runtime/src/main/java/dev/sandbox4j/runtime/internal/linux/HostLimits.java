package dev.sandbox4j.runtime.internal.linux;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Resource limits of the host that a sandbox cannot exceed, and what all sandboxes of a state
 * directory may use together ({@link Sandboxes}, the limits of their parent cgroup).
 */
public final class HostLimits {
  private static final long FALLBACK_NOFILE = 1024;
  private static final long MAX_NOFILE = 1 << 20;
  private static final long GIB = 1L << 30;

  /** The weight of the sandboxes' parent cgroup: half of a default (1024) peer's. */
  public static final int SANDBOXES_CPU_SHARES = 512;

  /** The most processes a sandbox gets by default, however large the host. */
  static final int MAX_DEFAULT_PIDS = 4096;

  /** The fewest processes a sandbox gets by default, however small the host. */
  static final int MIN_DEFAULT_PIDS = 256;

  private HostLimits() {}

  /**
   * The limits of the parent cgroup of every sandbox of one state directory: together, however many
   * there are, sandboxes cannot take the host's memory, process table or CPU.
   *
   * @param memoryBytes memory (and memory+swap) of all sandboxes together
   * @param pids processes and threads of all sandboxes together
   * @param cpuShares the parent's cgroup v1 {@code cpu.shares} (v2 {@code cpu.weight} is a tenth of
   *     it): the host's own processes, at 1024 each, win over all sandboxes together
   */
  public record Sandboxes(long memoryBytes, long pids, int cpuShares) {
    public Sandboxes {
      if (memoryBytes < 64L << 20 || pids < 16 || cpuShares < 2 || cpuShares > 262_144) {
        throw new IllegalArgumentException(
            "sandboxes' limits out of range: memory "
                + memoryBytes
                + ", pids "
                + pids
                + ", cpu.shares "
                + cpuShares);
      }
    }

    /** The v2 {@code cpu.weight} matching {@link #cpuShares} (1 to 10000; default 100). */
    int cpuWeight() {
      return Math.clamp(cpuShares / 10, 1, 10_000);
    }
  }

  /** {@link #sandboxes(long, long, long)} from this host's {@code /proc}. */
  static Sandboxes sandboxes() {
    return sandboxes(
        memTotal(),
        procLong("/proc/sys/kernel/pid_max", 32_768),
        procLong("/proc/sys/kernel/threads-max", 32_768));
  }

  /**
   * What all sandboxes may use together on a host with {@code memTotal} bytes of memory and the
   * given {@code pid_max} and {@code threads-max}: the memory less a reserve for the host (a tenth,
   * but at least a quarter of it up to 1 GiB), half of the smaller of {@code pid_max} and {@code
   * threads-max} (every pid of the host is a pid of that table, threads included), and {@link
   * #SANDBOXES_CPU_SHARES}. No CPU quota: it would throttle every sandbox together once one of them
   * used it up (a neighbour's fork bomb would stall a sandbox's every command to the next period),
   * while the weight keeps the host ahead whenever it wants the CPU and costs nothing when it does
   * not.
   */
  static Sandboxes sandboxes(long memTotal, long pidMax, long threadsMax) {
    long reserve = Math.max(memTotal / 10, Math.min(GIB, memTotal / 4));
    long memory = Math.max(64L << 20, memTotal - reserve);
    long pids = Math.max(16, Math.min(pidMax, threadsMax) / 2);
    return new Sandboxes(memory, pids, SANDBOXES_CPU_SHARES);
  }

  /**
   * The default process limit of one sandbox: an eighth of what all sandboxes may use together
   * ({@link Sandboxes#pids}), within {@value #MIN_DEFAULT_PIDS} and {@value #MAX_DEFAULT_PIDS}. On
   * a host with {@code pid_max} 32768 that is 2048, so eight sandboxes at their default fill the
   * sandboxes' share, not the host's table.
   */
  public static int defaultSandboxPids() {
    return defaultSandboxPids(sandboxes().pids());
  }

  public static int defaultSandboxPids(long sandboxesPids) {
    return (int) Math.clamp(sandboxesPids / 8, MIN_DEFAULT_PIDS, MAX_DEFAULT_PIDS);
  }

  /** MemTotal of {@code /proc/meminfo} in bytes (4 GiB if unreadable). */
  static long memTotal() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
        if (line.startsWith("MemTotal:")) {
          String[] parts = line.substring("MemTotal:".length()).trim().split("\\s+");
          return Long.parseLong(parts[0]) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      // fall through
    }
    return 4 * GIB;
  }

  /**
   * A number from a sysctl file. Not {@code Files.readString}: it reads such a file (size 0) one
   * byte first, and a sysctl answers a read at a later offset with end of file ("3" for 32768).
   */
  private static long procLong(String file, long fallback) {
    try {
      return Long.parseLong(Files.readAllLines(Path.of(file)).getFirst().strip());
    } catch (IOException | RuntimeException e) {
      return fallback;
    }
  }

  /**
   * This process's hard RLIMIT_NOFILE: a container may not get more, because raising an rlimit past
   * the hard limit needs CAP_SYS_RESOURCE, which root lacks on some hosts (EPERM at start).
   */
  public static long openFilesHardLimit() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
        if (line.startsWith("Max open files")) {
          String[] parts = line.substring("Max open files".length()).trim().split("\\s+");
          return parts[1].equals("unlimited")
              ? MAX_NOFILE
              : Math.min(Long.parseLong(parts[1]), MAX_NOFILE);
        }
      }
    } catch (IOException | RuntimeException e) {
      // fall through
    }
    return FALLBACK_NOFILE;
  }
}
