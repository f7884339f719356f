package dev.sandbox4j.runtime;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Resource limits of the host that a sandbox cannot exceed. */
final class HostLimits {
  private static final long FALLBACK_NOFILE = 1024;
  private static final long MAX_NOFILE = 1 << 20;

  private HostLimits() {}

  /**
   * This process's hard RLIMIT_NOFILE: a container may not get more, because raising an rlimit past
   * the hard limit needs CAP_SYS_RESOURCE, which root lacks on some hosts (EPERM at start).
   */
  static long openFilesHardLimit() {
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
