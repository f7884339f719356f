package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Schema migrations: an old database is brought up to date keeping its rows; a newer one is
 * refused. The database (tenants' env values, key hashes) is root's alone on the host.
 */
class DatabaseTest {

  @TempDir Path data;

  @Test
  void aVersionOneDatabaseMigratesKeepingItsKeysAndSandboxes() throws Exception {
    try (Database old = Database.open(data, 1)) {
      assertThat(old.version()).isEqualTo(1);
    }
    String key = ServerKeys.KEY_PREFIX + "old-key";
    try (Connection c = DriverManager.getConnection("jdbc:sqlite:" + data.resolve("server.db"));
        Statement s = c.createStatement()) {
      s.execute(
          "INSERT INTO organizations(id, name, created) VALUES (7, 'old', '2026-01-01T00:00:00Z')");
      s.execute(
          "INSERT INTO api_keys(id, organization, prefix, hash, created) VALUES ('k1', 7, 's4j_ol', '"
              + ServerKeys.hash(key)
              + "', '2026-01-01T00:00:00Z')");
      s.execute(
          "INSERT INTO sandboxes(id, organization, labels, created) VALUES ('abc', 7, '{\"a\":\"b\"}',"
              + " '2026-01-01T00:00:00Z')");
    }
    try (Database db = Database.open(data)) {
      assertThat(db.version()).isEqualTo(Database.MIGRATIONS.size());
      assertThat(db.organizationOfKey(ServerKeys.hash(key))).contains(new Organization(7, "old"));
      Database.SandboxRow row = db.sandbox(7, "abc").orElseThrow();
      assertThat(Sandboxes.labels(row)).containsEntry("a", "b");
      assertThat(Sandboxes.env(row)).isEmpty();
      assertThat(row.workingDirectory()).isNull();
      assertThat(db.snapshots(7)).isEmpty();
      // an upgraded server goes on serving the default image, and no other
      assertThat(db.publishedImages())
          .extracting(Database.PublishedRow::name)
          .containsExactly(
              "default"); // it owned sandboxes, and they were the local engine's: the only provider
      // then
      assertThatThrownBy(() -> db.bindProvider("docker"))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("serves provider 'local' sandboxes, not 'docker'");
      db.bindProvider("local");
    }
    try (Database again = Database.open(data)) { // idempotent
      assertThat(again.version()).isEqualTo(Database.MIGRATIONS.size());
    }
  }

  @Test
  void aDatabaseFromANewerServerIsRefused() throws Exception {
    Database.open(data).close();
    try (Connection c = DriverManager.getConnection("jdbc:sqlite:" + data.resolve("server.db"));
        Statement s = c.createStatement()) {
      s.execute("PRAGMA user_version = 99");
    }
    assertThatThrownBy(() -> Database.open(data))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("99")
        .hasMessageContaining("newer");
  }

  @Test
  void theDatabaseIsOwnerOnlyFromItsCreation() throws Exception {
    Path dir = data.resolve("server");
    try (Database db = Database.open(dir)) {
      assertThat(db.version()).isEqualTo(Database.MIGRATIONS.size()); // written: WAL and shm exist
      assertThat(mode(dir)).as("the data directory").isEqualTo("rwx------");
      for (String name : new String[] {"server.db", "server.db-wal", "server.db-shm"}) {
        assertThat(dir.resolve(name)).exists();
        assertThat(mode(dir.resolve(name))).as(name).isEqualTo("rw-------");
      }
    }
  }

  @Test
  void aDatabaseMadeBeforeIsTightened() throws Exception {
    Database.open(data).close();
    Files.setPosixFilePermissions(data, PosixFilePermissions.fromString("rwxr-xr-x"));
    Files.setPosixFilePermissions(
        data.resolve("server.db"), PosixFilePermissions.fromString("rw-r--r--"));
    Database.open(data).close();
    assertThat(mode(data)).isEqualTo("rwx------");
    assertThat(mode(data.resolve("server.db"))).isEqualTo("rw-------");
  }

  private static String mode(Path p) throws java.io.IOException {
    return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
  }
}
