package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * Where and as whom the client talks to Modal, resolved the way Modal's own clients (libmodal's Go
 * and JS) do: the config file is {@code $MODAL_CONFIG_PATH}, else {@code ~/.modal.toml}; its
 * profile is {@code $MODAL_PROFILE}, else the first one with {@code active = true}; {@code
 * MODAL_SERVER_URL}, {@code MODAL_TOKEN_ID}, {@code MODAL_TOKEN_SECRET}, {@code MODAL_ENVIRONMENT}
 * and {@code MODAL_IMAGE_BUILDER_VERSION} override the profile's keys; values given to the builder
 * override both.
 *
 * @param serverUrl {@code https://} (TLS) or {@code http://} (plaintext) URL of the control plane
 * @param environment the Modal environment, empty for the server's default
 */
record ModalConfig(
    URI serverUrl,
    String tokenId,
    String tokenSecret,
    String environment,
    String imageBuilderVersion) {

  static final String DEFAULT_SERVER_URL = "https://api.modal.com:443";
  static final String DEFAULT_IMAGE_BUILDER_VERSION = "2024.10";

  ModalConfig {
    String scheme = serverUrl.getScheme();
    if (!"https".equals(scheme) && !"http".equals(scheme)) {
      throw new IllegalArgumentException(
          "invalid Modal server URL " + serverUrl + ": it must start with https:// or http://");
    }
  }

  /** Whether the control plane is reached without TLS. */
  boolean plaintext() {
    return "http".equals(serverUrl.getScheme());
  }

  /**
   * Whether the server runs on this machine: libmodal then reaches the command router without TLS
   * too, which is what lets a local server stand in for Modal.
   */
  boolean localServer() {
    String host = serverUrl.getHost();
    return host != null
        && (host.equals("localhost")
            || host.equals("127.0.0.1")
            || host.equals("::1")
            || host.equals("[::1]")
            || host.equals("172.21.0.1"));
  }

  /** Values the builder was given explicitly; null where it was not. */
  record Overrides(String serverUrl, String tokenId, String tokenSecret, String environment) {}

  /**
   * Resolves the config from {@code env} (the process environment, in production) and the user's
   * {@code home}. Missing credentials fail here, before any call, as in Modal's clients.
   */
  static ModalConfig resolve(Map<String, String> env, Path home, Overrides overrides) {
    Path file =
        Optional.ofNullable(env.get("MODAL_CONFIG_PATH"))
            .filter(p -> !p.isEmpty())
            .map(Path::of)
            .orElse(home.resolve(".modal.toml"));
    Map<String, String> profile = profile(file, env.get("MODAL_PROFILE"));
    String serverUrl =
        first(overrides.serverUrl(), env.get("MODAL_SERVER_URL"), profile.get("server_url"));
    String tokenId = first(overrides.tokenId(), env.get("MODAL_TOKEN_ID"), profile.get("token_id"));
    String tokenSecret =
        first(overrides.tokenSecret(), env.get("MODAL_TOKEN_SECRET"), profile.get("token_secret"));
    String environment =
        first(overrides.environment(), env.get("MODAL_ENVIRONMENT"), profile.get("environment"));
    String builderVersion =
        first(env.get("MODAL_IMAGE_BUILDER_VERSION"), profile.get("image_builder_version"));
    if (tokenId == null || tokenSecret == null) {
      throw new WorkspaceException(
          "no Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, or run `modal token"
              + " new` to write them to "
              + file);
    }
    return new ModalConfig(
        URI.create(serverUrl == null ? DEFAULT_SERVER_URL : serverUrl),
        tokenId,
        tokenSecret,
        environment == null ? "" : environment,
        builderVersion == null ? DEFAULT_IMAGE_BUILDER_VERSION : builderVersion);
  }

  /** The keys of the selected profile; empty if the file or the profile does not exist. */
  private static Map<String, String> profile(Path file, String named) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.UTF_8);
    } catch (NoSuchFileException e) {
      return Map.of();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the Modal config " + file, e);
    }
    Map<String, Map<String, String>> profiles = TomlProfiles.parse(file.toString(), text);
    if (named != null && !named.isEmpty()) {
      Map<String, String> profile = profiles.get(named);
      if (profile == null) {
        throw new WorkspaceException(
            "MODAL_PROFILE is " + named + ", but " + file + " has no such profile");
      }
      return profile;
    }
    return profiles.values().stream()
        .filter(p -> "true".equals(p.get("active")))
        .findFirst()
        .orElse(Map.of());
  }

  private static String first(String... values) {
    for (String v : values) {
      if (v != null && !v.isEmpty()) {
        return v;
      }
    }
    return null;
  }

  @Override
  public String toString() {
    // never the secret
    return "ModalConfig[" + serverUrl + ", token " + tokenId + ", environment " + environment + "]";
  }
}
