package dev.sandbox4j.server;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * The API keys of a server's data directory: create one for an organization (its plaintext is
 * returned once and never stored), list them, revoke one.
 *
 * <pre>{@code
 * try (ServerKeys keys = ServerKeys.open(dataDir)) {
 *   String key = keys.create("acme").key();   // "s4j_..."; show it once
 * }
 * }</pre>
 *
 * <p>A key is {@code s4j_} followed by 32 random bytes (base64url); the database keeps only its
 * SHA-256 and a short display prefix. Revoking takes effect on the server's next request: every
 * request looks its key up. Works while a server runs on the same directory (SQLite in WAL mode).
 * Thread-safe.
 */
public final class ServerKeys implements AutoCloseable {

  private static final Pattern ORG_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");
  private static final SecureRandom RANDOM = new SecureRandom();
  static final String KEY_PREFIX = "s4j_";

  private final Database db;

  private ServerKeys(Database db) {
    this.db = db;
  }

  /** Opens (creating, migrating) the database of data directory {@code dataDirectory}. */
  public static ServerKeys open(Path dataDirectory) {
    return new ServerKeys(Database.open(Objects.requireNonNull(dataDirectory, "dataDirectory")));
  }

  static ServerKeys over(Database db) {
    return new ServerKeys(db);
  }

  /**
   * A new key for organization {@code organization}, creating the organization if new.
   *
   * @throws IllegalArgumentException if the name is not 1 to 63 of a-z, 0-9, '.', '_', '-'
   */
  public CreatedKey create(String organization) {
    if (organization == null || !ORG_NAME.matcher(organization).matches()) {
      throw new IllegalArgumentException(
          "invalid organization name '"
              + organization
              + "': 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit");
    }
    byte[] secret = new byte[32];
    RANDOM.nextBytes(secret);
    String key = KEY_PREFIX + Base64.getUrlEncoder().withoutPadding().encodeToString(secret);
    byte[] idBytes = new byte[6];
    RANDOM.nextBytes(idBytes);
    String id = HexFormat.of().formatHex(idBytes);
    String prefix = key.substring(0, KEY_PREFIX.length() + 6);
    String now = Instant.now().toString();
    long org = db.organization(organization, now);
    db.insertKey(id, org, prefix, hash(key), now);
    return new CreatedKey(id, organization, prefix, key);
  }

  /** Every key, revoked ones too, oldest first. */
  public List<KeyInfo> list() {
    return db.keys().stream()
        .map(
            r ->
                new KeyInfo(
                    r.id(),
                    r.organizationName(),
                    r.prefix(),
                    Instant.parse(r.created()),
                    r.revoked() == null ? null : Instant.parse(r.revoked())))
        .toList();
  }

  /**
   * Revokes the key with id (or display prefix) {@code idOrPrefix}; the next request with it is
   * refused.
   *
   * @return whether an unrevoked key had that id or prefix
   * @throws IllegalArgumentException if the prefix names more than one unrevoked key
   */
  public boolean revoke(String idOrPrefix) {
    Objects.requireNonNull(idOrPrefix, "idOrPrefix");
    return db.revokeKey(idOrPrefix, Instant.now().toString()) > 0;
  }

  /** The SHA-256 of a key, hex: what the database keeps and looks up. */
  static String hash(String key) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new AssertionError("every JDK has SHA-256", e);
    }
  }

  @Override
  public void close() {
    db.close();
  }

  /**
   * A key just created.
   *
   * @param id its id, for {@link #revoke}
   * @param organization its organization
   * @param prefix the first characters, to recognize it in listings
   * @param key the key itself: shown once, stored nowhere
   */
  public record CreatedKey(String id, String organization, String prefix, String key) {
    /** Hides the key. */
    @Override
    public String toString() {
      return "CreatedKey[id=" + id + ", organization=" + organization + ", prefix=" + prefix + "]";
    }
  }

  /**
   * A key as listed: never its plaintext.
   *
   * @param id its id
   * @param organization its organization
   * @param prefix its first characters
   * @param created when it was created
   * @param revoked when it was revoked, or null
   */
  public record KeyInfo(
      String id, String organization, String prefix, Instant created, Instant revoked) {}
}
