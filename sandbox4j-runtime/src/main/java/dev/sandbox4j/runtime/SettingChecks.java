package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Timers;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.regex.Pattern;

/**
 * The rules {@link LocalSandbox.Builder}'s settings follow: each check returns the value it was
 * given, or throws an {@link IllegalArgumentException} naming the setting and what it allows. The
 * builder documents each setting.
 */
final class SettingChecks {
  private static final Pattern LABEL = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/-]{0,62}");
  private static final long MAX_MEMORY = 1L << 40;
  private static final int MAX_PIDS = 1 << 22;

  private SettingChecks() {}

  static String runtime(String runtime) {
    if (runtime == null || runtime.isBlank()) {
      throw new IllegalArgumentException("runtime must name an OCI runtime, e.g. crun");
    }
    return runtime;
  }

  static String workingDirectory(String path) {
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
    return path;
  }

  private static final java.util.regex.Pattern USER_PART =
      java.util.regex.Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}");

  /**
   * A user setting: {@code uid}, {@code name}, {@code uid:gid}, {@code name:group} (or a mix); a
   * number from 0 to 65535, the ids a sandbox maps. Names are resolved when a sandbox is created.
   */
  static String user(String user) {
    if (user == null) {
      throw new IllegalArgumentException("user must be UID, NAME, UID:GID or NAME:GROUP, not null");
    }
    String[] parts = user.split(":", -1);
    if (parts.length > 2) {
      throw new IllegalArgumentException(
          "user must be UID, NAME, UID:GID or NAME:GROUP (one ':' at most): " + user);
    }
    for (String part : parts) {
      if (!USER_PART.matcher(part).matches()) {
        throw new IllegalArgumentException(
            "user must be UID, NAME, UID:GID or NAME:GROUP (names of letters, digits, '_', '.',"
                + " '-'; up to 64): "
                + user.replaceAll("\\p{Cntrl}", "?"));
      }
      if (part.chars().allMatch(Character::isDigit)
          && (part.length() > 5 || Integer.parseInt(part) > 65_535)) {
        throw new IllegalArgumentException(
            "user ids must be from 0 to 65535 (the ids a sandbox maps): " + user);
      }
    }
    return user;
  }

  static void env(String name, String value) {
    if (name == null || name.isEmpty() || name.contains("=") || name.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("invalid env name '" + name + "'");
    }
    if (value == null || value.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("env value of " + name + " must be non-null, without NUL");
    }
  }

  static int cpus(int cpus) {
    if (cpus != 1 && cpus != 2 && cpus != 4 && cpus != 8) {
      throw new IllegalArgumentException("cpus must be 1, 2, 4 or 8, was " + cpus);
    }
    return cpus;
  }

  static long memory(long bytes) {
    if (bytes < 64L << 20 || bytes > MAX_MEMORY) {
      throw new IllegalArgumentException(
          "memory must be from 64 MiB to 1 TiB, was " + bytes + " bytes");
    }
    return bytes;
  }

  static int pids(int pids) {
    if (pids < 16 || pids > MAX_PIDS) {
      throw new IllegalArgumentException("pids must be from 16 to 4194304, was " + pids);
    }
    return pids;
  }

  static long diskReserve(long bytes) {
    if (bytes < 0) {
      throw new IllegalArgumentException("diskReserve must be 0 or more bytes, was " + bytes);
    }
    return bytes;
  }

  static void label(String key, String value) {
    if (key == null || !LABEL.matcher(key).matches()) {
      throw new IllegalArgumentException(
          "invalid label key '" + key + "': letters, digits, '.', '_', '/', '-', up to 63");
    }
    if (value == null || value.length() > 256 || value.chars().anyMatch(c -> c < 0x20)) {
      throw new IllegalArgumentException(
          "invalid value for label " + key + ": up to 256 characters, no control characters");
    }
  }

  static Duration noOutputTimeout(Duration limit) {
    if (limit == null || limit.isNegative() || limit.isZero()) {
      throw new IllegalArgumentException("noOutputTimeout must be positive, was " + limit);
    }
    return limit;
  }

  static Duration sandboxTimeout(Duration lifetime) {
    return Timers.checkLifetime(lifetime);
  }

  /** An idle timer: zero (never), or at least a second. */
  static Duration nonNegative(Duration d, String what) {
    return Timers.checkIdle(d, what);
  }

  /** A sandbox from a snapshot keeps the snapshot's size and image: none may be set with it. */
  static void snapshotAlone(String snapshot, List<String> sizeSettings, boolean imageSet) {
    if (snapshot != null && (!sizeSettings.isEmpty() || imageSet)) {
      List<String> conflicting = new ArrayList<>(new LinkedHashSet<>(sizeSettings));
      if (imageSet) {
        conflicting.add("image");
      }
      throw new IllegalArgumentException(
          "snapshot cannot be combined with "
              + String.join(", ", conflicting)
              + ": a sandbox from snapshot '"
              + snapshot
              + "' keeps the size and image it was saved with");
    }
  }
}
