package dev.sandbox4j.runtime.internal.registry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Base64;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Credentials are found where the docker CLI keeps them: {@code auths} in its config.json (in each
 * of its forms), credential helpers by host and the default store, after those given explicitly.
 */
class RegistryCredentialsTest {
  @TempDir Path temp;

  @Test
  void authsEntriesInEachFormAreFoundByHost() throws IOException {
    Path config =
        write(
            """
            {"auths": {
              "https://index.docker.io/v1/": {"auth": "%s"},
              "ghcr.io": {"username": "octo", "password": "pat"},
              "https://registry.example.com:5000/v2/": {"auth": "%s"},
              "quay.io": {"auth": "%s", "identitytoken": "refresh-me"}
            }}
            """
                .formatted(b64("hub-user:hub:pass"), b64("ex:secret"), b64("q:unused")));
    RegistryCredentials creds = new RegistryCredentials(Map.of(), config);

    RegistryCredentials.Credentials hub = creds.forHost("docker.io").orElseThrow();
    assertThat(hub.username()).isEqualTo("hub-user");
    assertThat(hub.password()).as("only the first ':' splits").isEqualTo("hub:pass");
    assertThat(hub.source()).contains("auths.https://index.docker.io/v1/");
    assertThat(creds.forHost("ghcr.io").orElseThrow().password()).isEqualTo("pat");
    assertThat(creds.forHost("registry.example.com:5000").orElseThrow().username()).isEqualTo("ex");
    RegistryCredentials.Credentials quay = creds.forHost("quay.io").orElseThrow();
    assertThat(quay.identityToken()).isEqualTo("refresh-me");
    assertThat(quay.username()).isEqualTo("q");
    assertThat(creds.forHost("gcr.io")).isEmpty();
    assertThat(hub.toString()).doesNotContain("hub:pass");
  }

  @Test
  void explicitCredentialsWinAndAMissingConfigMeansNone() {
    RegistryCredentials.Credentials given =
        RegistryCredentials.parseUserPassword("me:pw", "--registry-auth");
    RegistryCredentials creds =
        new RegistryCredentials(Map.of("ghcr.io", given), temp.resolve("absent.json"));
    assertThat(creds.forHost("ghcr.io")).contains(given);
    assertThat(creds.forHost("docker.io")).isEmpty();
    assertThatThrownBy(() -> RegistryCredentials.parseUserPassword("nocolon", "--registry-auth"))
        .hasMessageContaining("--registry-auth must be USER:PASSWORD");
  }

  @Test
  void aCredentialHelperIsAskedForItsHostAndTheStoreForTheOthers() throws IOException {
    Path helpers = Files.createDirectories(temp.resolve("bin"));
    // Answers for the server it is asked about (read from stdin), as docker-credential-* do.
    helper(
        helpers,
        "per-host",
        """
        read server
        if [ "$1" = get ] && [ "$server" = ghcr.io ]; then
          echo '{"ServerURL":"ghcr.io","Username":"helped","Secret":"from-helper"}'
        else
          echo 'credentials not found in native keychain'; exit 1
        fi
        """);
    helper(
        helpers,
        "store",
        """
        read server
        echo "{\\"ServerURL\\":\\"$server\\",\\"Username\\":\\"<token>\\",\\"Secret\\":\\"tok-$server\\"}"
        """);
    Path config =
        write(
            """
            {"credHelpers": {"ghcr.io": "per-host"}, "credsStore": "store",
             "auths": {"quay.io": {"auth": "%s"}}}
            """
                .formatted(b64("q:w")));
    RegistryCredentials creds = new RegistryCredentials(Map.of(), config, helpers);

    RegistryCredentials.Credentials ghcr = creds.forHost("ghcr.io").orElseThrow();
    assertThat(ghcr.username()).isEqualTo("helped");
    assertThat(ghcr.password()).isEqualTo("from-helper");
    assertThat(ghcr.source()).endsWith("docker-credential-per-host");
    RegistryCredentials.Credentials hub = creds.forHost("docker.io").orElseThrow();
    assertThat(hub.identityToken())
        .as("docker.io is asked as its v1 index URL, and <token> means an identity token")
        .isEqualTo("tok-https://index.docker.io/v1/");
  }

  @Test
  void aHelperThatCannotRunIsAnErrorNamingIt() throws IOException {
    Path config = write("{\"credsStore\": \"missing-helper\"}");
    RegistryCredentials creds = new RegistryCredentials(Map.of(), config, temp);
    assertThatThrownBy(() -> creds.forHost("ghcr.io"))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("docker-credential-missing-helper")
        .hasMessageContaining("cannot be run");
    Path bad = write("{\"credsStore\": \"../../bin/sh\"}");
    assertThatThrownBy(() -> new RegistryCredentials(Map.of(), bad, temp).forHost("ghcr.io"))
        .hasMessageContaining("not a valid name");
  }

  private Path write(String json) throws IOException {
    Path file = temp.resolve("config-" + System.nanoTime() + ".json");
    Files.writeString(file, json);
    return file;
  }

  private static void helper(Path dir, String name, String body) throws IOException {
    Path file = dir.resolve("docker-credential-" + name);
    Files.writeString(file, "#!/bin/sh\n" + body);
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
  }

  private static String b64(String s) {
    return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
  }
}
