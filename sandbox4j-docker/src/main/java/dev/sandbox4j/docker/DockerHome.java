package dev.sandbox4j.docker;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.runtime.internal.util.SecretFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Optional;

/**
 * What the docker provider keeps on the host for one daemon, outside every container: {@code
 * $SANDBOX4J_HOME/docker/<daemon>/} (default {@code /var/lib/sandbox4j/docker/...} for root, {@code
 * ~/.sandbox4j/docker/...} for another user; mode 0700), where {@code <daemon>} is a digest of the
 * daemon's address. Its supervisor ({@link DockerSupervisor}) and every JVM using that daemon share
 * it:
 *
 * <ul>
 *   <li>{@code sandboxes/<id>/egress.json} (0600): the sandbox's egress policy, header values
 *       included (they never enter the container); {@code port-token}; {@code forwards/}; {@code
 *       timers.json} and its {@code activity} stamp (the engine's {@code Timers} files);
 *   <li>{@code ended/<id>.json}: why a timer ended a sandbox, for whoever uses it next;
 *   <li>{@code network/}: the egress proxy's CA and hosts file, the port proxy's port;
 *   <li>{@code supervisor.lock}, {@code supervisor.log}.
 * </ul>
 *
 * <p>A sandbox has a directory if it is on the egress network or has timers; it is made just before
 * its container, and removed when it is destroyed; one whose container is gone otherwise (removed
 * with the docker CLI) is removed by the supervisor.
 */
final class DockerHome {
  static final String POLICY_FILE = "egress.json";

  private static final java.util.regex.Pattern ID = java.util.regex.Pattern.compile("[0-9a-f]{12}");

  private final Path dir;

  private DockerHome(Path dir) {
    this.dir = dir;
  }

  /**
   * The home of the daemon at {@code host} under this process's state directory ({@link
   * SandboxHome#ofThisProcess}: {@code $SANDBOX4J_HOME}, root's default, or the user's own).
   */
  static DockerHome of(URI host) {
    return at(SandboxHome.ofThisProcess().resolve("docker").resolve(digest(host.toString())));
  }

  static DockerHome at(Path dir) {
    return new DockerHome(dir);
  }

  private static String digest(String s) {
    try {
      byte[] d = MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(d, 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  static boolean isId(String id) {
    return id != null && ID.matcher(id).matches();
  }

  /** {@code id} if it is a docker sandbox id (12 lowercase hex digits); else fails naming it. */
  static String checkId(String id) {
    if (!isId(id)) {
      throw new IllegalArgumentException(
          "malformed docker sandbox id '" + id + "': expected 12 lowercase hex digits");
    }
    return id;
  }

  Path dir() {
    return dir;
  }

  Path sandboxes() {
    return dir.resolve("sandboxes");
  }

  Path sandbox(String id) {
    return sandboxes().resolve(checkId(id));
  }

  /**
   * Makes the home (0700) and sandbox {@code id}'s directory, with its first egress policy if it is
   * on the egress network ({@code policy} not null).
   */
  Path createSandbox(String id, EgressPolicy policy) {
    try {
      PrivateFiles.createPrivateDirectories(sandboxes());
      Path sandbox = sandbox(id);
      PrivateFiles.createPrivateDirectories(sandbox); // the network's part may have made it
      if (policy != null) {
        writePolicy(id, policy);
      }
      return sandbox;
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot record the state of docker sandbox " + id + " under " + dir + ": " + e, e);
    }
  }

  /** Replaces the policy of sandbox {@code id} at once for every reader (temp, fsync, rename). */
  void writePolicy(String id, EgressPolicy policy) throws IOException {
    SecretFiles.write(
        sandbox(id).resolve(POLICY_FILE), policy.toJson().getBytes(StandardCharsets.UTF_8));
  }

  /** The policy of sandbox {@code id}, empty if it has no directory (not a networked sandbox). */
  Optional<EgressPolicy> policy(String id) {
    try {
      return Optional.of(EgressPolicy.fromJson(Files.readString(sandbox(id).resolve(POLICY_FILE))));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read the egress policy of docker:" + id + ": " + e, e);
    }
  }

  /** Whether any sandbox has a directory here (the supervisor runs while one has). */
  boolean anySandboxes() {
    try (var dirs = Files.list(sandboxes())) {
      return dirs.anyMatch(d -> !d.getFileName().toString().startsWith("."));
    } catch (NoSuchFileException e) {
      return false;
    } catch (IOException e) {
      return true; // cannot tell: keep serving
    }
  }

  /** Removes sandbox {@code id}'s directory; quiet if it has none. */
  void removeSandbox(String id) {
    try {
      Path sandbox = sandbox(id);
      if (!Files.isDirectory(sandbox, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        return;
      }
      // only what this provider wrote there, in a root-only home: files and forwards/
      try (var all = Files.walk(sandbox)) {
        for (Path p : all.sorted(java.util.Comparator.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot remove the state of docker:" + id + " (" + sandbox(id) + "): " + e, e);
    }
  }
}
