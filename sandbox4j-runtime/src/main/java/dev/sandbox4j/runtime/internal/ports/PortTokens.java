package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.Optional;
import java.util.UUID;

/**
 * The per-sandbox access tokens of port URLs: {@code port-token} (0600) in the sandbox's directory,
 * written when the sandbox is created with one and given anew to each fork, sent by clients in
 * header {@value #TOKEN_HEADER} or query parameter {@value #TOKEN_PARAM}.
 */
public final class PortTokens {
  public static final String TOKEN_HEADER = "X-Sandbox4j-Token";
  static final String TOKEN_PARAM = "s4j_token";
  private static final SecureRandom RANDOM = new SecureRandom();

  private PortTokens() {}

  static Path tokenFile(Path sandboxDir) {
    return sandboxDir.resolve("port-token");
  }

  /** The sandbox's access token, if it has one. */
  public static Optional<String> token(Path sandboxDir) {
    try {
      return Optional.of(Files.readString(tokenFile(sandboxDir)).strip());
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + tokenFile(sandboxDir) + ": " + e, e);
    }
  }

  /** Writes a new random token, readable by root only from its first byte on. */
  public static void writeNewToken(Path sandboxDir) throws IOException {
    byte[] secret = new byte[32];
    RANDOM.nextBytes(secret);
    String token = Base64.getUrlEncoder().withoutPadding().encodeToString(secret);
    Path temp = sandboxDir.resolve(".port-token.tmp-" + UUID.randomUUID());
    try {
      Files.createFile(
          temp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
      Files.writeString(temp, token + "\n");
      Files.move(temp, tokenFile(sandboxDir), StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(temp);
    }
  }

  /** A fork of a sandbox with a token gets a token too (its own: they are two machines). */
  public static void inherit(Path parentDir, Path forkDir) throws IOException {
    if (Files.exists(tokenFile(parentDir))) {
      writeNewToken(forkDir);
    }
  }
}
