package dev.sandbox4j.modal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Config resolution as Modal's clients do it: env over ~/.modal.toml profiles, builder over both.
 */
class ModalConfigTest {
  private static final ModalConfig.Overrides NONE =
      new ModalConfig.Overrides(null, null, null, null);

  @TempDir Path home;

  private void toml(String text) throws IOException {
    Files.writeString(home.resolve(".modal.toml"), text);
  }

  private static final String PROFILES =
      """
      # written by `modal token new`
      [default]
      token_id = "ak-default"
      token_secret = "as-default"

      [work]
      token_id = 'ak-work'
      token_secret = "as-work" # a comment
      server_url = "http://localhost:50051"
      environment = "staging"
      active = true

      [other]
      token_id = "ak-other"
      token_secret = "as-other"
      image_builder_version = "2025.06"
      """;

  @Test
  void environmentAlone() {
    ModalConfig config =
        ModalConfig.resolve(
            Map.of("MODAL_TOKEN_ID", "ak-env", "MODAL_TOKEN_SECRET", "as-env"), home, NONE);
    assertThat(config.tokenId()).isEqualTo("ak-env");
    assertThat(config.tokenSecret()).isEqualTo("as-env");
    assertThat(config.serverUrl()).hasToString("https://api.modal.com:443");
    assertThat(config.plaintext()).isFalse();
    assertThat(config.environment()).isEmpty();
    assertThat(config.imageBuilderVersion()).isEqualTo("2024.10");
    assertThat(config.toString()).doesNotContain("as-env");
  }

  @Test
  void activeProfileIsUsed() throws IOException {
    toml(PROFILES);
    ModalConfig config = ModalConfig.resolve(Map.of(), home, NONE);
    assertThat(config.tokenId()).isEqualTo("ak-work");
    assertThat(config.tokenSecret()).isEqualTo("as-work");
    assertThat(config.serverUrl()).hasToString("http://localhost:50051");
    assertThat(config.plaintext()).isTrue();
    assertThat(config.localServer()).isTrue();
    assertThat(config.environment()).isEqualTo("staging");
  }

  @Test
  void modalProfileSelectsAnother() throws IOException {
    toml(PROFILES);
    ModalConfig config = ModalConfig.resolve(Map.of("MODAL_PROFILE", "other"), home, NONE);
    assertThat(config.tokenId()).isEqualTo("ak-other");
    assertThat(config.imageBuilderVersion()).isEqualTo("2025.06");
    assertThat(config.serverUrl()).hasToString("https://api.modal.com:443");
  }

  @Test
  void unknownProfileFails() throws IOException {
    toml(PROFILES);
    assertThatThrownBy(() -> ModalConfig.resolve(Map.of("MODAL_PROFILE", "nope"), home, NONE))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("no such profile");
  }

  @Test
  void withoutActiveProfileNoFileValuesApply() throws IOException {
    toml(PROFILES.replace("active = true", ""));
    assertThatThrownBy(() -> ModalConfig.resolve(Map.of(), home, NONE))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("no Modal credentials");
  }

  @Test
  void environmentOverridesProfile() throws IOException {
    toml(PROFILES);
    Map<String, String> env = new HashMap<>();
    env.put("MODAL_TOKEN_ID", "ak-env");
    env.put("MODAL_SERVER_URL", "https://eu.example.test");
    env.put("MODAL_ENVIRONMENT", "prod");
    env.put("MODAL_IMAGE_BUILDER_VERSION", "2023.12");
    ModalConfig config = ModalConfig.resolve(env, home, NONE);
    assertThat(config.tokenId()).isEqualTo("ak-env");
    assertThat(config.tokenSecret()).as("the rest still from the profile").isEqualTo("as-work");
    assertThat(config.serverUrl()).hasToString("https://eu.example.test");
    assertThat(config.environment()).isEqualTo("prod");
    assertThat(config.imageBuilderVersion()).isEqualTo("2023.12");
  }

  @Test
  void builderOverridesEnvironment() throws IOException {
    toml(PROFILES);
    ModalConfig config =
        ModalConfig.resolve(
            Map.of("MODAL_TOKEN_ID", "ak-env", "MODAL_TOKEN_SECRET", "as-env"),
            home,
            new ModalConfig.Overrides("http://127.0.0.1:1", "ak-b", "as-b", "dev"));
    assertThat(config.tokenId()).isEqualTo("ak-b");
    assertThat(config.tokenSecret()).isEqualTo("as-b");
    assertThat(config.serverUrl()).hasToString("http://127.0.0.1:1");
    assertThat(config.environment()).isEqualTo("dev");
  }

  @Test
  void configPathVariable() throws IOException {
    Path elsewhere = home.resolve("elsewhere.toml");
    Files.writeString(
        elsewhere, "[p]\ntoken_id = \"ak-x\"\ntoken_secret = \"as-x\"\nactive = true\n");
    ModalConfig config =
        ModalConfig.resolve(Map.of("MODAL_CONFIG_PATH", elsewhere.toString()), home, NONE);
    assertThat(config.tokenId()).isEqualTo("ak-x");
  }

  @Test
  void missingCredentialsFailBeforeAnyCall() {
    assertThatThrownBy(() -> ModalConfig.resolve(Map.of("MODAL_TOKEN_ID", "ak"), home, NONE))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("MODAL_TOKEN_SECRET");
  }

  @Test
  void invalidServerUrl() {
    assertThatThrownBy(
            () ->
                ModalConfig.resolve(
                    Map.of(
                        "MODAL_TOKEN_ID",
                        "a",
                        "MODAL_TOKEN_SECRET",
                        "b",
                        "MODAL_SERVER_URL",
                        "grpc://x"),
                    home,
                    NONE))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("invalid Modal server URL");
  }

  @Test
  void unparsableFileFails() throws IOException {
    toml("[p]\ntoken_id = [1, 2]\n");
    assertThatThrownBy(() -> ModalConfig.resolve(Map.of(), home, NONE))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("line 2");
  }

  @Test
  void sandboxTimeoutIsValidated() {
    ModalSandbox.Builder builder = ModalSandbox.builder();
    assertThatThrownBy(() -> builder.sandboxTimeout(Duration.ofSeconds(9)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 10 seconds and 24 hours");
    assertThatThrownBy(() -> builder.sandboxTimeout(Duration.ofHours(24).plusSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.sandboxTimeout(Duration.ofMillis(10_500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whole seconds");
    builder.sandboxTimeout(Duration.ofSeconds(10)).sandboxTimeout(Duration.ofHours(24));
    assertThatThrownBy(() -> builder.idleTimeout(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.workingDirectory("relative"))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
