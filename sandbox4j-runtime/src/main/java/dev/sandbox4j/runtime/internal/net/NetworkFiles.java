package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Optional;

/**
 * A sandbox's network settings in its directory: {@code network.json} (its slot and named networks)
 * and {@code egress.json} (its policy; mode 0600, since header values are secrets).
 */
final class NetworkFiles {
  static final String EGRESS_FILE = "egress.json";

  private NetworkFiles() {}

  /** {@code network.json}. */
  record Saved(int slot, List<String> networks) {
    Saved {
      networks = networks == null ? List.of() : List.copyOf(networks);
    }
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper JSON =
      new com.fasterxml.jackson.databind.ObjectMapper()
          .disable(
              com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  /**
   * Writes new sandbox {@code sandboxDir}'s settings, with {@code slot}. Not synced here: the
   * sandbox's RUNNING record, written durably later, is the one durable step of a create, and on
   * ext4 (data=ordered) its commit carries these files' data too.
   */
  static void create(Path sandboxDir, int slot, Networks.Settings settings) throws IOException {
    writePolicy(sandboxDir, settings.egress(), false);
    Files.write(
        sandboxDir.resolve(Networks.NETWORK_FILE),
        JSON.writeValueAsBytes(new Saved(slot, settings.networks())),
        StandardOpenOption.CREATE_NEW);
  }

  /**
   * A sandbox's settings, or empty for a sandbox made before sandboxes had networks (loopback
   * only).
   */
  static Optional<Saved> saved(Path sandboxDir) {
    try {
      return Optional.of(
          JSON.readValue(
              Files.readAllBytes(sandboxDir.resolve(Networks.NETWORK_FILE)), Saved.class));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot read " + sandboxDir.resolve(Networks.NETWORK_FILE) + ": " + e, e);
    }
  }

  static EgressPolicy policy(Path sandboxDir) {
    try {
      return EgressPolicy.fromJson(Files.readString(sandboxDir.resolve(EGRESS_FILE)));
    } catch (NoSuchFileException e) {
      return EgressPolicy.none();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + sandboxDir.resolve(EGRESS_FILE) + ": " + e, e);
    }
  }

  static void writePolicy(Path sandboxDir, EgressPolicy policy, boolean durably)
      throws IOException {
    // Root-only from its first byte: it holds the header values, which are secrets.
    Path temp = sandboxDir.resolve("." + EGRESS_FILE + ".new");
    Files.deleteIfExists(temp);
    Files.createFile(
        temp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    Files.writeString(temp, policy.toJson());
    if (durably) {
      try (var ch = java.nio.channels.FileChannel.open(temp, StandardOpenOption.WRITE)) {
        ch.force(true);
      }
    }
    Files.move(
        temp,
        sandboxDir.resolve(EGRESS_FILE),
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
  }

  /** The networks sandbox {@code id} is on. */
  static List<String> networksOf(Path sandboxDir) {
    return saved(sandboxDir).map(Saved::networks).orElse(List.of());
  }
}
