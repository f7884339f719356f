package dev.sandbox4j.runtime.internal.util;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;

/**
 * Facts about a state directory ({@code $SANDBOX4J_HOME}) that every layer of the engine shares:
 * where the default one is, what a sandbox id looks like (its directory's name under {@code
 * sandboxes/}), and the name of the supervisor's log. Kept here, at the bottom, so that the parts
 * that need one of them (cgroups, networks, the port proxy) do not reach up to the engine or the
 * API for it.
 */
public final class SandboxHome {
  private SandboxHome() {}

  /** The state directory when neither the builder nor {@code SANDBOX4J_HOME} names one. */
  public static final Path DEFAULT = Path.of("/var/lib/sandbox4j");

  /**
   * The state directory of a provider that also runs without root (Docker, the CLI): {@code
   * envHome} ({@code $SANDBOX4J_HOME}) if set; else, for root, {@link #DEFAULT} (which the local
   * engine uses too); else {@code .sandbox4j} in the user's home, since another user's state
   * directory is not theirs to read.
   */
  public static Path of(String envHome, String userHome, boolean root) {
    if (envHome != null && !envHome.isBlank()) {
      return Path.of(envHome).toAbsolutePath().normalize();
    }
    return root ? DEFAULT : Path.of(userHome, ".sandbox4j");
  }

  /** {@link #of} for this process: its environment, its user's home, whether its uid is 0. */
  public static Path ofThisProcess() {
    return of(System.getenv("SANDBOX4J_HOME"), System.getProperty("user.home"), isRoot());
  }

  /** Whether this process's effective uid is 0 ({@code /proc}; without it, the user's name). */
  public static boolean isRoot() {
    try {
      return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
    } catch (IOException | RuntimeException noProc) {
      return "root".equals(System.getProperty("user.name")); // no /proc: macOS
    }
  }

  /** The supervisor's log, in the home: what it did and what failed (see Supervisor). */
  public static final String SUPERVISOR_LOG = "supervisor.log";

  private static final Pattern ID = Pattern.compile("[a-z0-9]{1,32}");

  /** Whether {@code id} is a well-formed local sandbox id: 1 to 32 of {@code [a-z0-9]}. */
  public static boolean isId(String id) {
    return id != null && ID.matcher(id).matches();
  }

  /** Fails with a message naming {@code id} unless it is a well-formed local sandbox id. */
  public static void checkId(String id) {
    if (!isId(id)) {
      throw new IllegalArgumentException(
          "malformed local sandbox id '" + id + "': expected 1 to 32 of [a-z0-9]");
    }
  }
}
