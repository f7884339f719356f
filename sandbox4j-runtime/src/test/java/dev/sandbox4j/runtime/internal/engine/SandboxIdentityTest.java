package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.image.ImageConfig;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How an image's config and a user setting become who a sandbox runs as, and how it is kept. */
class SandboxIdentityTest {
  @TempDir Path temp;

  private static final ImageUsers USERS =
      ImageUsers.of(
          "img",
          """
          root:x:0:0:root:/root:/bin/sh
          # a comment
          app:x:1234:2345:App:/home/app:/bin/sh
          nohome:x:77:78::relative:/bin/sh
          """,
          """
          root:x:0:
          staff:x:50:app
          """);

  @Test
  void namesNumbersAndGroupsResolveAsDockerRunUserDoes() {
    assertThat(USERS.resolve("app", "User"))
        .isEqualTo(new ImageUsers.Resolved(1234, 2345, "app", "/home/app"));
    assertThat(USERS.resolve("app:staff", "User"))
        .isEqualTo(new ImageUsers.Resolved(1234, 50, "app", "/home/app"));
    assertThat(USERS.resolve("1234:0", "User"))
        .isEqualTo(new ImageUsers.Resolved(1234, 0, "app", "/home/app"));
    assertThat(USERS.resolve("4321", "User"))
        .as("a number without an entry: group 0, home /")
        .isEqualTo(new ImageUsers.Resolved(4321, 0, null, "/"));
    assertThat(USERS.resolve("0", "User"))
        .isEqualTo(new ImageUsers.Resolved(0, 0, "root", "/root"));
    assertThat(ImageUsers.of("empty", null, null).resolve("0", "User").home())
        .as("root without /etc/passwd")
        .isEqualTo("/root");
    assertThat(USERS.resolve("nohome", "User").home())
        .as("a relative home is no home")
        .isEqualTo("/");
  }

  @Test
  void unknownNamesAndOutOfRangeIdsFailNamingThemAndTheImage() {
    assertThatThrownBy(() -> USERS.resolve("ghost", "its image config's User"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessage(
            "its image config's User 'ghost' names user 'ghost', which image 'img' does not have"
                + " in /etc/passwd");
    assertThatThrownBy(() -> USERS.resolve("app:ghosts", "user"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining(
            "names group 'ghosts', which image 'img' does not have in /etc/group");
    assertThatThrownBy(() -> USERS.resolve("65536", "user"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("outside the ids a sandbox maps (0 to 65535)");
    assertThatThrownBy(() -> USERS.resolve("0:99999999999", "user"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("outside the ids a sandbox maps");
    assertThatThrownBy(() -> USERS.resolve("a:b:c", "user"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("is not NAME, UID, NAME:GROUP or UID:GID");
  }

  @Test
  void anImageConfigGivesUserWorkingDirectoryAndEnvironment() {
    SandboxIdentity id =
        SandboxIdentity.ofImage(
            new ImageConfig(
                "app", "/srv", List.of("PATH=/opt/bin:/bin", "GREETING=hi"), List.of(), List.of()),
            USERS);

    assertThat(id.user()).isEqualTo("1234:2345");
    assertThat(id.workingDirectory()).isEqualTo("/srv");
    assertThat(id.envMap())
        .containsExactly(
            Map.entry("PATH", "/opt/bin:/bin"),
            Map.entry("HOME", "/home/app"),
            Map.entry("LANG", "C.UTF-8"),
            Map.entry("GREETING", "hi"));

    SandboxIdentity none = SandboxIdentity.ofImage(ImageConfig.NONE, USERS);
    assertThat(none.user()).as("no User: root").isEqualTo("0:0");
    assertThat(none.workingDirectory()).as("no WorkingDir: /").isEqualTo("/");
    assertThat(none.envMap()).containsEntry("HOME", "/root").doesNotContainKey("USER");
  }

  @Test
  void anotherUserKeepsTheEnvironmentButHomeAndUser() {
    SandboxIdentity root = SandboxIdentity.SEED.as(USERS.resolve("root", "user"));
    assertThat(root.user()).isEqualTo("0:0");
    assertThat(root.workingDirectory()).isEqualTo(Engine.HOME);
    assertThat(root.envMap())
        .containsEntry("HOME", "/root")
        .containsEntry("USER", "root")
        .containsEntry("PATH", Engine.BASE_ENV.get("PATH"));
    assertThat(SandboxIdentity.SEED.as(USERS.resolve("4321", "user")).envMap())
        .doesNotContainKey("USER")
        .containsEntry("HOME", "/");
  }

  @Test
  void theSeedIsTodaysDefault() {
    assertThat(SandboxIdentity.SEED.user()).isEqualTo(Engine.USER);
    assertThat(SandboxIdentity.SEED.workingDirectory()).isEqualTo(Engine.HOME);
    assertThat(SandboxIdentity.SEED.envMap()).isEqualTo(Engine.BASE_ENV);
  }

  @Test
  void aSnapshotsConfigGivesTheSameIdentityBack() {
    SandboxIdentity id =
        SandboxIdentity.ofImage(
            new ImageConfig("app:staff", "/srv", List.of("A=1"), List.of(), List.of()), USERS);
    assertThat(SandboxIdentity.fromConfig(id.toConfig())).isEqualTo(id);
  }

  @Test
  void aRecordKeepsItsIdentityAndAnOldRecordHasTheSeeds() throws Exception {
    SandboxIdentity id = new SandboxIdentity(0, 0, "/", List.of("PATH=/bin", "HOME=/root"));
    SandboxRecord record =
        new SandboxRecord(
                SandboxRecord.FORMAT_VERSION,
                "abc123",
                SandboxRecord.Status.RUNNING,
                "img",
                "2026-12-03T00:00:00Z",
                Map.of(),
                1,
                1L << 30,
                64,
                List.of("0".repeat(64)))
            .withIdentity(id);
    Path file = temp.resolve("state.json");
    record.write(file);
    assertThat(SandboxRecord.read(file).identity()).isEqualTo(id);
    assertThat(java.nio.file.Files.readString(file)).doesNotContain("\"seed\"");

    String old =
        """
        {"formatVersion": 1, "id": "abc123", "status": "RUNNING", "image": "default",
         "created": "2026-01-01T00:00:00Z", "labels": {}, "cpus": 1, "memoryBytes": 1073741824,
         "pids": 64, "layers": null}
        """;
    java.nio.file.Files.writeString(file, old);
    assertThat(SandboxRecord.read(file).identity()).isEqualTo(SandboxIdentity.SEED);
  }

  @Test
  void idsOutOfRangeAreNoIdentity() {
    assertThatThrownBy(() -> new SandboxIdentity(65536, 0, "/", List.of()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new SandboxIdentity(0, -1, "/", List.of()))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
