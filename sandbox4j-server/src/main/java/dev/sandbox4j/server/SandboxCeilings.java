package dev.sandbox4j.server;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The most one sandbox of the server may get, whatever its request says: admission control. A
 * create, a create from a snapshot and a fork over any of them is refused with a 400 naming the
 * field and the ceiling, before anything is made.
 *
 * <p>The defaults come from the host, so that one API key cannot ask for more than the machine has:
 * {@link #ofHost()}. They bound one sandbox; the engine's parent cgroup bounds the sum.
 */
record SandboxCeilings(int cpus, long memoryBytes, int pids, long diskBytes, long diskInodes) {

  static final long MIB = 1L << 20;
  static final long GIB = 1L << 30;

  /** The engine's smallest and largest accepted values (LocalSandbox.Builder). */
  static final long MIN_MEMORY = 64 * MIB;

  static final long MAX_MEMORY = 1L << 40;
  static final int MIN_PIDS = 16;
  static final int MAX_PIDS = 1 << 22;

  /**
   * What the engine gives a sandbox whose request omits a size (LocalSandbox.Builder): 4 GiB of
   * memory per CPU, and a number of pids that is at most {@link #ENGINE_MAX_DEFAULT_PIDS}. An
   * omitted size that could be over a ceiling is given the ceiling instead: the request did not ask
   * for more, so it is not refused.
   */
  static final long ENGINE_MEMORY_PER_CPU = 4 * GIB;

  static final int ENGINE_MAX_DEFAULT_PIDS = 4096;

  /** The engine's smallest and largest disk quota, and its default (LocalSandbox.Builder.disk). */
  static final long MIN_DISK = 64 * MIB;

  static final long MAX_DISK = 16L << 40;
  static final long ENGINE_DISK = 10 * GIB;

  /** The engine's smallest and largest inode quota, and its default (Builder.diskInodes). */
  static final long MIN_DISK_INODES = 1024;

  static final long MAX_DISK_INODES = 1L << 31;
  static final long ENGINE_DISK_INODES = 1_000_000;

  SandboxCeilings {
    if (cpus < 1) {
      throw new IllegalArgumentException("the cpus ceiling must be at least 1, was " + cpus);
    }
    if (memoryBytes < MIN_MEMORY) {
      throw new IllegalArgumentException(
          "the memory ceiling must be at least 64 MiB, was " + memoryBytes + " bytes");
    }
    if (pids < MIN_PIDS) {
      throw new IllegalArgumentException("the pids ceiling must be at least 16, was " + pids);
    }
    if (diskBytes < MIN_DISK || diskBytes > MAX_DISK) {
      throw new IllegalArgumentException(
          "the disk ceiling must be from 64 MiB to 16 TiB, was " + diskBytes + " bytes");
    }
    if (diskInodes < MIN_DISK_INODES || diskInodes > MAX_DISK_INODES) {
      throw new IllegalArgumentException(
          "the disk inodes ceiling must be from 1024 to 2147483648, was " + diskInodes);
    }
  }

  /**
   * Ceilings derived from this host: every CPU; its memory less a headroom for the host itself (an
   * eighth of it, at least 1 GiB); a quarter of {@code kernel.pid_max}, at most 32768, so that no
   * single sandbox can take the pids the host and the other sandboxes need; a disk of a quarter of
   * the file system that holds {@code home} (the engine's; at least 1 GiB, at most 16 TiB), so that
   * no single sandbox can fill it; the engine's default of 1,000,000 inodes.
   */
  static SandboxCeilings ofHost(Path home) {
    int cpus = Math.max(1, Runtime.getRuntime().availableProcessors());
    long total = memTotal();
    long memory = total <= 0 ? MAX_MEMORY : Math.max(MIN_MEMORY, total - Math.max(GIB, total / 8));
    long pidMax = pidMax();
    int pids = (int) Math.max(MIN_PIDS, Math.min(32768, pidMax <= 0 ? 32768 : pidMax / 4));
    long fs = fileSystemBytes(home);
    long disk = fs <= 0 ? MAX_DISK : Math.min(MAX_DISK, Math.max(GIB, fs / 4));
    return new SandboxCeilings(cpus, memory, pids, disk, ENGINE_DISK_INODES);
  }

  /** The total size of the file system that holds {@code path} (or its nearest parent), or -1. */
  private static long fileSystemBytes(Path path) {
    try {
      for (Path p = path.toAbsolutePath(); p != null; p = p.getParent()) {
        if (Files.exists(p)) {
          return Files.getFileStore(p).getTotalSpace();
        }
      }
    } catch (IOException | RuntimeException e) {
      // unknown: only the engine's own bound applies
    }
    return -1;
  }

  /** The host's memory in bytes ({@code MemTotal} of /proc/meminfo), or -1 if unknown. */
  private static long memTotal() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
        if (line.startsWith("MemTotal:")) {
          String[] parts = line.substring("MemTotal:".length()).trim().split("\\s+");
          return Long.parseLong(parts[0]) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux: no engine runs here either
    }
    return -1;
  }

  private static long pidMax() {
    try {
      // a stream, not Files.readString: on this kernel that reads "3" of "32768" from the sysctl
      return Long.parseLong(
          Files.readAllLines(Path.of("/proc/sys/kernel/pid_max")).getFirst().trim());
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /** Refuses a request that asks for {@code value} of size field {@code field} over the ceiling. */
  static void check(String field, long value, long ceiling, String unit) {
    if (value > ceiling) {
      throw ApiException.invalid(
          field,
          field
              + " "
              + value
              + " is over this server's ceiling of "
              + ceiling
              + unit
              + " per sandbox");
    }
  }

  /** Refuses a request for this size (fields cpus, memoryBytes, pids). */
  void admit(int cpus, long memoryBytes, int pids) {
    check("cpus", cpus, this.cpus, "");
    check("memoryBytes", memoryBytes, this.memoryBytes, " bytes");
    check("pids", pids, this.pids, "");
  }

  /**
   * Refuses a sandbox that takes its size from {@code source} (a snapshot, a fork's parent), saved
   * when the ceilings may have been higher; {@code field} is the request field that named it.
   */
  void admitCopy(String field, String source, int cpus, long memoryBytes, int pids) {
    copy(field, source, "cpus", cpus, this.cpus, "");
    copy(field, source, "memoryBytes", memoryBytes, this.memoryBytes, " bytes");
    copy(field, source, "pids", pids, this.pids, "");
  }

  /**
   * Refuses a sandbox whose disk quota comes from {@code source}, as {@link #admitCopy} does its
   * other sizes. A size of 0 (a sandbox made before disks, whose copy gets the engine's default) is
   * held as that default; a negative one is not copied (the request sets its own, checked apart).
   */
  void admitCopiedDisk(String field, String source, long diskBytes, long diskInodes) {
    if (diskBytes >= 0) {
      long bytes = diskBytes == 0 ? ENGINE_DISK : diskBytes;
      copy(field, source, "diskBytes", bytes, this.diskBytes, " bytes");
    }
    if (diskInodes >= 0) {
      long inodes = diskInodes == 0 ? ENGINE_DISK_INODES : diskInodes;
      copy(field, source, "diskInodes", inodes, this.diskInodes, "");
    }
  }

  private static void copy(
      String field, String source, String size, long value, long ceiling, String unit) {
    if (value > ceiling) {
      throw ApiException.invalid(
          field,
          source
              + " has "
              + size
              + " "
              + value
              + ", over this server's ceiling of "
              + ceiling
              + unit
              + " per sandbox");
    }
  }
}
