package dev.sandbox4j.server;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The server's own state in SQLite at {@code <dataDir>/server.db}: organizations, API keys, which
 * organization owns which sandbox and snapshot, and which images the operator published to all.
 *
 * <p>One connection, used under this object's lock: SQLite serializes writers anyway, and every
 * statement here takes microseconds. Other processes (the CLI's {@code keys} commands) open the
 * same file; WAL mode and a busy timeout let them work beside a running server.
 *
 * <p>Schema changes are the versioned list {@link #MIGRATIONS}; {@code PRAGMA user_version} holds
 * how many were applied, and each pending one is applied with its version bump in one transaction.
 */
final class Database implements AutoCloseable {

  /** Index i migrates from version i to i + 1. Append only: released entries are never edited. */
  static final List<List<String>> MIGRATIONS =
      List.of(
          // 1: tenancy
          List.of(
              """
              CREATE TABLE organizations (
                id INTEGER PRIMARY KEY,
                name TEXT NOT NULL UNIQUE,
                created TEXT NOT NULL)""",
              """
              CREATE TABLE api_keys (
                id TEXT PRIMARY KEY,
                organization INTEGER NOT NULL REFERENCES organizations(id),
                prefix TEXT NOT NULL,
                hash TEXT NOT NULL UNIQUE,
                created TEXT NOT NULL,
                revoked TEXT)""",
              """
              CREATE TABLE sandboxes (
                id TEXT PRIMARY KEY,
                organization INTEGER NOT NULL REFERENCES organizations(id),
                labels TEXT NOT NULL,
                created TEXT NOT NULL)""",
              "CREATE INDEX sandboxes_by_organization ON sandboxes(organization, id)"),
          // 2: what a sandbox's commands get on every attach (the engine keeps neither), snapshots
          List.of(
              "ALTER TABLE sandboxes ADD COLUMN env TEXT NOT NULL DEFAULT '{}'",
              "ALTER TABLE sandboxes ADD COLUMN working_directory TEXT",
              """
              CREATE TABLE snapshots (
                organization INTEGER NOT NULL REFERENCES organizations(id),
                name TEXT NOT NULL,
                engine_name TEXT NOT NULL UNIQUE,
                source TEXT NOT NULL,
                created TEXT NOT NULL,
                PRIMARY KEY (organization, name))"""),
          // 3: the images every organization may start sandboxes from; the default image is one
          // until the operator unpublishes it (any other image on the host is no organization's)
          List.of(
              """
              CREATE TABLE published_images (
                name TEXT PRIMARY KEY,
                published TEXT NOT NULL)""",
              "INSERT INTO published_images(name, published)"
                  + " VALUES ('default', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))"),
          // 4: the provider whose sandboxes the ids and snapshot names are (one per directory); a
          // database that already owns something was the local engine's, the only one before
          List.of(
              """
              CREATE TABLE settings (
                name TEXT PRIMARY KEY,
                value TEXT NOT NULL)""",
              "INSERT INTO settings(name, value) SELECT 'provider', 'local'"
                  + " WHERE EXISTS (SELECT 1 FROM sandboxes) OR EXISTS (SELECT 1 FROM snapshots)"));

  private final Connection connection;

  private Database(Connection connection) {
    this.connection = connection;
  }

  private static final java.util.Set<java.nio.file.attribute.PosixFilePermission> OWNER_ONLY_DIR =
      java.nio.file.attribute.PosixFilePermissions.fromString("rwx------");
  private static final java.util.Set<java.nio.file.attribute.PosixFilePermission> OWNER_ONLY_FILE =
      java.nio.file.attribute.PosixFilePermissions.fromString("rw-------");

  /**
   * {@code <dataDir>/server.db}, owner-only from its creation: it holds tenants' env values and key
   * hashes. The directory is made 0700 (an existing one is tightened), the database file is made
   * 0600 before SQLite opens it, and SQLite gives its {@code -wal} and {@code -shm} files the
   * database file's mode. Files of a database made before this rule are tightened.
   */
  private static Path privateDatabaseFile(Path dataDirectory) throws java.io.IOException {
    if (!Files.isDirectory(dataDirectory)) {
      Path parent = dataDirectory.toAbsolutePath().getParent();
      if (parent != null) {
        Files.createDirectories(parent);
      }
      try {
        Files.createDirectory(
            dataDirectory,
            java.nio.file.attribute.PosixFilePermissions.asFileAttribute(OWNER_ONLY_DIR));
      } catch (java.nio.file.FileAlreadyExistsException raced) {
        // made meanwhile
      }
    }
    Files.setPosixFilePermissions(dataDirectory, OWNER_ONLY_DIR);
    Path file = dataDirectory.resolve("server.db");
    try {
      Files.createFile(
          file, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(OWNER_ONLY_FILE));
    } catch (java.nio.file.FileAlreadyExistsException existing) {
      for (String suffix : java.util.List.of("", "-wal", "-shm", "-journal")) {
        Path f = dataDirectory.resolve("server.db" + suffix);
        if (Files.isRegularFile(f, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
          Files.setPosixFilePermissions(f, OWNER_ONLY_FILE);
        }
      }
    }
    return file;
  }

  /** Opens (creating) {@code <dataDir>/server.db} and applies pending migrations. */
  static Database open(Path dataDirectory) {
    return open(dataDirectory, MIGRATIONS.size());
  }

  /** Opens and migrates up to {@code version} only: tests build an old database with it. */
  static Database open(Path dataDirectory, int version) {
    try {
      Path file = privateDatabaseFile(dataDirectory);
      Connection c = DriverManager.getConnection("jdbc:sqlite:" + file.toAbsolutePath());
      try (Statement s = c.createStatement()) {
        s.execute("PRAGMA busy_timeout = 10000");
        s.execute("PRAGMA journal_mode = WAL");
        // one fsync per checkpoint, not per commit: a crash of the process loses nothing; a power
        // loss may lose the last commits (a sandbox then has no owner: its timers still end it)
        s.execute("PRAGMA synchronous = NORMAL");
        s.execute("PRAGMA foreign_keys = ON");
      }
      Database db = new Database(c);
      db.migrate(version);
      return db;
    } catch (SQLException | java.io.IOException e) {
      throw new IllegalStateException(
          "cannot open the server database in " + dataDirectory + ": " + e.getMessage(), e);
    }
  }

  synchronized int version() {
    try (Statement s = connection.createStatement();
        ResultSet rs = s.executeQuery("PRAGMA user_version")) {
      return rs.next() ? rs.getInt(1) : 0;
    } catch (SQLException e) {
      throw failed("read the schema version", e);
    }
  }

  private synchronized void migrate(int target) throws SQLException {
    int current = version();
    if (current > MIGRATIONS.size()) {
      throw new IllegalStateException(
          "the server database has schema version "
              + current
              + ", newer than this server knows ("
              + MIGRATIONS.size()
              + "): use a newer sandbox4j");
    }
    // BEGIN IMMEDIATE: two processes opening an old database must not both migrate it
    for (int v = current; v < target; v++) {
      try (Statement s = connection.createStatement()) {
        s.execute("BEGIN IMMEDIATE");
        try {
          int now;
          try (ResultSet rs = s.executeQuery("PRAGMA user_version")) {
            now = rs.getInt(1);
          }
          if (now == v) {
            for (String sql : MIGRATIONS.get(v)) {
              s.execute(sql);
            }
            s.execute("PRAGMA user_version = " + (v + 1));
          }
          s.execute("COMMIT");
        } catch (SQLException e) {
          s.execute("ROLLBACK");
          throw e;
        }
      }
    }
  }

  /**
   * Binds this data directory to provider {@code name} (the first server on it does), or refuses a
   * directory bound to another: its sandbox ids and snapshot names are that provider's, and a
   * server on another would take them for sandboxes gone and forget them.
   *
   * @throws IllegalArgumentException if the directory serves another provider
   */
  synchronized void bindProvider(String name) {
    try (PreparedStatement insert =
        prepare("INSERT OR IGNORE INTO settings(name, value) VALUES ('provider', ?)", name)) {
      insert.executeUpdate();
    } catch (SQLException e) {
      throw failed("record the provider", e);
    }
    String bound;
    try (PreparedStatement p = prepare("SELECT value FROM settings WHERE name = 'provider'");
        ResultSet rs = p.executeQuery()) {
      bound = rs.next() ? rs.getString(1) : name;
    } catch (SQLException e) {
      throw failed("read the provider", e);
    }
    if (!bound.equals(name)) {
      throw new IllegalArgumentException(
          "the server data directory serves provider '"
              + bound
              + "' sandboxes, not '"
              + name
              + "': give a server on "
              + name
              + " a data directory of its own (and keys made there)");
    }
  }

  // ---- organizations and keys ----------------------------------------------------------------

  record KeyRow(
      String id,
      long organization,
      String organizationName,
      String prefix,
      String created,
      String revoked) {}

  synchronized long organization(String name, String now) {
    try {
      try (PreparedStatement p =
          connection.prepareStatement(
              "INSERT OR IGNORE INTO organizations(name, created) VALUES (?, ?)")) {
        p.setString(1, name);
        p.setString(2, now);
        p.executeUpdate();
      }
      try (PreparedStatement p =
          connection.prepareStatement("SELECT id FROM organizations WHERE name = ?")) {
        p.setString(1, name);
        try (ResultSet rs = p.executeQuery()) {
          rs.next();
          return rs.getLong(1);
        }
      }
    } catch (SQLException e) {
      throw failed("create organization", e);
    }
  }

  synchronized void insertKey(
      String id, long organization, String prefix, String hash, String now) {
    update(
        "INSERT INTO api_keys(id, organization, prefix, hash, created) VALUES (?, ?, ?, ?, ?)",
        id,
        organization,
        prefix,
        hash,
        now);
  }

  /** The organization (id, name) of the unrevoked key with this hash. */
  synchronized Optional<Organization> organizationOfKey(String hash) {
    try (PreparedStatement p =
        connection.prepareStatement(
            "SELECT o.id, o.name FROM api_keys k JOIN organizations o ON o.id = k.organization"
                + " WHERE k.hash = ? AND k.revoked IS NULL")) {
      p.setString(1, hash);
      try (ResultSet rs = p.executeQuery()) {
        return rs.next()
            ? Optional.of(new Organization(rs.getLong(1), rs.getString(2)))
            : Optional.empty();
      }
    } catch (SQLException e) {
      throw failed("look up a key", e);
    }
  }

  synchronized List<KeyRow> keys() {
    try (PreparedStatement p =
            connection.prepareStatement(
                "SELECT k.id, k.organization, o.name, k.prefix, k.created, k.revoked FROM api_keys k"
                    + " JOIN organizations o ON o.id = k.organization ORDER BY k.created, k.id");
        ResultSet rs = p.executeQuery()) {
      List<KeyRow> out = new ArrayList<>();
      while (rs.next()) {
        out.add(
            new KeyRow(
                rs.getString(1),
                rs.getLong(2),
                rs.getString(3),
                rs.getString(4),
                rs.getString(5),
                rs.getString(6)));
      }
      return out;
    } catch (SQLException e) {
      throw failed("list keys", e);
    }
  }

  /** Revokes the unrevoked key whose id or display prefix is {@code idOrPrefix}; 0 if none. */
  synchronized int revokeKey(String idOrPrefix, String now) {
    try (PreparedStatement p =
            prepare(
                "SELECT COUNT(*) FROM api_keys WHERE (id = ? OR prefix = ?) AND revoked IS NULL",
                idOrPrefix,
                idOrPrefix);
        ResultSet rs = p.executeQuery()) {
      if (rs.next() && rs.getInt(1) > 1) {
        throw new IllegalArgumentException(
            "'" + idOrPrefix + "' names more than one key: give the key's id (see keys ls)");
      }
    } catch (SQLException e) {
      throw failed("look up a key", e);
    }
    return update(
        "UPDATE api_keys SET revoked = ? WHERE (id = ? OR prefix = ?) AND revoked IS NULL",
        now,
        idOrPrefix,
        idOrPrefix);
  }

  // ---- sandboxes ------------------------------------------------------------------------------

  record SandboxRow(
      String id,
      long organization,
      String labels,
      String env,
      String workingDirectory,
      String created) {}

  synchronized void insertSandbox(SandboxRow r) {
    update(
        "INSERT INTO sandboxes(id, organization, labels, env, working_directory, created) VALUES (?, ?, ?, ?, ?, ?)",
        r.id(),
        r.organization(),
        r.labels(),
        r.env(),
        r.workingDirectory(),
        r.created());
  }

  synchronized Optional<SandboxRow> sandbox(long organization, String id) {
    List<SandboxRow> rows =
        sandboxes(
            "SELECT id, organization, labels, env, working_directory, created FROM sandboxes WHERE organization = ? AND id = ?",
            organization,
            id);
    return rows.stream().findFirst();
  }

  /** The organization's sandboxes with ids after {@code after} (null: from the start), by id. */
  synchronized List<SandboxRow> sandboxes(long organization, String after) {
    return sandboxes(
        "SELECT id, organization, labels, env, working_directory, created FROM sandboxes WHERE organization = ? AND id > ? ORDER BY id",
        organization,
        after == null ? "" : after);
  }

  /**
   * Sandbox {@code id} with its owner, whichever organization that is: for the E2B envd routes,
   * which name a sandbox by header and prove access with its token, not with an API key.
   */
  synchronized Optional<SandboxRow> sandboxOfAnyOrganization(String id) {
    return sandboxes(
            "SELECT id, organization, labels, env, working_directory, created FROM sandboxes WHERE id = ?",
            id)
        .stream()
        .findFirst();
  }

  /** The organization with row id {@code id}. */
  synchronized Optional<Organization> organization(long id) {
    try (PreparedStatement p = prepare("SELECT id, name FROM organizations WHERE id = ?", id);
        ResultSet rs = p.executeQuery()) {
      return rs.next()
          ? Optional.of(new Organization(rs.getLong(1), rs.getString(2)))
          : Optional.empty();
    } catch (SQLException e) {
      throw failed("look up an organization", e);
    }
  }

  synchronized List<SandboxRow> allSandboxes() {
    return sandboxes(
        "SELECT id, organization, labels, env, working_directory, created FROM sandboxes ORDER BY id");
  }

  synchronized int deleteSandbox(String id) {
    return update("DELETE FROM sandboxes WHERE id = ?", id);
  }

  private List<SandboxRow> sandboxes(String sql, Object... args) {
    try (PreparedStatement p = prepare(sql, args);
        ResultSet rs = p.executeQuery()) {
      List<SandboxRow> out = new ArrayList<>();
      while (rs.next()) {
        out.add(
            new SandboxRow(
                rs.getString(1),
                rs.getLong(2),
                rs.getString(3),
                rs.getString(4),
                rs.getString(5),
                rs.getString(6)));
      }
      return out;
    } catch (SQLException e) {
      throw failed("read sandboxes", e);
    }
  }

  // ---- snapshots -----------------------------------------------------------------------------

  record SnapshotRow(
      long organization, String name, String engineName, String source, String created) {}

  synchronized void upsertSnapshot(SnapshotRow r) {
    update(
        "INSERT INTO snapshots(organization, name, engine_name, source, created) VALUES (?, ?, ?, ?, ?)"
            + " ON CONFLICT(organization, name) DO UPDATE SET source = excluded.source, created = excluded.created",
        r.organization(),
        r.name(),
        r.engineName(),
        r.source(),
        r.created());
  }

  synchronized List<SnapshotRow> snapshots(long organization) {
    try (PreparedStatement p =
            prepare(
                "SELECT organization, name, engine_name, source, created FROM snapshots WHERE organization = ? ORDER BY name",
                organization);
        ResultSet rs = p.executeQuery()) {
      List<SnapshotRow> out = new ArrayList<>();
      while (rs.next()) {
        out.add(
            new SnapshotRow(
                rs.getLong(1), rs.getString(2), rs.getString(3), rs.getString(4), rs.getString(5)));
      }
      return out;
    } catch (SQLException e) {
      throw failed("read snapshots", e);
    }
  }

  synchronized int deleteSnapshot(long organization, String name) {
    return update("DELETE FROM snapshots WHERE organization = ? AND name = ?", organization, name);
  }

  // ---- published images ----------------------------------------------------------------------

  record PublishedRow(String name, String published) {}

  /** Publishes {@code name}; false if it already was. */
  synchronized boolean publishImage(String name, String now) {
    return update(
            "INSERT OR IGNORE INTO published_images(name, published) VALUES (?, ?)", name, now)
        > 0;
  }

  /** Unpublishes {@code name}; false if it was not published. */
  synchronized boolean unpublishImage(String name) {
    return update("DELETE FROM published_images WHERE name = ?", name) > 0;
  }

  synchronized boolean isPublished(String name) {
    try (PreparedStatement p = prepare("SELECT 1 FROM published_images WHERE name = ?", name);
        ResultSet rs = p.executeQuery()) {
      return rs.next();
    } catch (SQLException e) {
      throw failed("read published images", e);
    }
  }

  synchronized List<PublishedRow> publishedImages() {
    try (PreparedStatement p =
            prepare("SELECT name, published FROM published_images ORDER BY name");
        ResultSet rs = p.executeQuery()) {
      List<PublishedRow> out = new ArrayList<>();
      while (rs.next()) {
        out.add(new PublishedRow(rs.getString(1), rs.getString(2)));
      }
      return out;
    } catch (SQLException e) {
      throw failed("read published images", e);
    }
  }

  // ---- plumbing ------------------------------------------------------------------------------

  private PreparedStatement prepare(String sql, Object... args) throws SQLException {
    PreparedStatement p = connection.prepareStatement(sql);
    for (int i = 0; i < args.length; i++) {
      p.setObject(i + 1, args[i]);
    }
    return p;
  }

  private int update(String sql, Object... args) {
    try (PreparedStatement p = prepare(sql, args)) {
      return p.executeUpdate();
    } catch (SQLException e) {
      throw failed("write", e);
    }
  }

  private static IllegalStateException failed(String what, SQLException e) {
    return new IllegalStateException("server database: cannot " + what + ": " + e.getMessage(), e);
  }

  @Override
  public synchronized void close() {
    try {
      connection.close();
    } catch (SQLException e) {
      // closing: nothing left to protect
    }
  }
}
