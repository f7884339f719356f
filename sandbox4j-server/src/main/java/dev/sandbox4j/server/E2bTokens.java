package dev.sandbox4j.server;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The per-sandbox envd access token: {@code <organization id>.<HMAC-SHA256(secret, organization
 * id/sandbox id)>}, the secret 32 random bytes in {@code <data>/e2b-token.secret} (0600), so that a
 * token survives a server restart and proves both the sandbox and its owner without a database row.
 * envd checks it in {@code X-Access-Token} on every call but {@code /health}.
 */
final class E2bTokens {

  private final byte[] secret;

  private E2bTokens(byte[] secret) {
    this.secret = secret;
  }

  static E2bTokens open(Path dataDirectory) {
    Path file = dataDirectory.resolve("e2b-token.secret");
    try {
      if (!Files.exists(file)) {
        byte[] fresh = new byte[32];
        new SecureRandom().nextBytes(fresh);
        Path tmp =
            Files.createTempFile(
                dataDirectory,
                ".e2b-token",
                ".tmp",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.write(tmp, fresh, StandardOpenOption.TRUNCATE_EXISTING);
        try {
          Files.move(tmp, file, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
          Files.deleteIfExists(tmp);
          throw e;
        }
      }
      byte[] secret = Files.readAllBytes(file);
      if (secret.length != 32) {
        throw new IllegalStateException(file + " must hold 32 bytes; remove it to make a new one");
      }
      return new E2bTokens(secret);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read or create " + file + ": " + e.getMessage(), e);
    }
  }

  String token(long organization, String sandboxId) {
    return organization + "." + mac(organization + "/" + sandboxId);
  }

  /** The organization a token was given to for {@code sandboxId}, or -1 if it is not ours. */
  long organizationOf(String token, String sandboxId) {
    if (token == null) {
      return -1;
    }
    int dot = token.indexOf('.');
    if (dot <= 0 || dot > 19) {
      return -1;
    }
    long org;
    try {
      org = Long.parseLong(token.substring(0, dot));
    } catch (NumberFormatException e) {
      return -1;
    }
    byte[] wanted = token(org, sandboxId).getBytes(StandardCharsets.UTF_8);
    return MessageDigest.isEqual(wanted, token.getBytes(StandardCharsets.UTF_8)) ? org : -1;
  }

  private String mac(String text) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      return HexFormat.of().formatHex(mac.doFinal(text.getBytes(StandardCharsets.UTF_8)));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is missing from the JDK", e);
    }
  }
}
