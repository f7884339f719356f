package dev.sandbox4j.runtime.internal.registry;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * Where a registry's credentials come from, in order: those given explicitly (the builder, the
 * CLI's {@code --registry-auth}), then the docker CLI's {@code config.json} ({@code
 * $DOCKER_CONFIG/config.json}, else {@code ~/.docker/config.json}): a credential helper named for
 * the host in {@code credHelpers}, then the {@code credsStore} helper, then the host's entry in
 * {@code auths} ({@code auth} as base64 {@code user:password}, or {@code username}/{@code
 * password}, or an {@code identitytoken}). A helper is the program {@code docker-credential-NAME},
 * asked with {@code get} and the server on stdin, as docker does; one that knows no credentials for
 * the host means none. No credentials anywhere: anonymous.
 */
public final class RegistryCredentials {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern HELPER = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}");
  private static final long HELPER_TIMEOUT_SECONDS = 30;
  private static final String DOCKER_HUB_KEY = "https://index.docker.io/v1/";

  /**
   * A user name and password (or identity token) for one registry.
   *
   * @param username the user; null with an identity token
   * @param password the password or access token
   * @param identityToken an OAuth2 refresh token (docker's {@code identitytoken}), or null
   * @param source where they came from, for error messages (never the secret itself)
   */
  public record Credentials(String username, String password, String identityToken, String source) {
    @Override
    public String toString() {
      return "credentials of " + username + " from " + source; // never the secret
    }
  }

  private final Map<String, Credentials> explicit;
  private final Path dockerConfig;
  private final Path helperDirectory; // null: helpers are found on PATH, as docker finds them

  /**
   * Credentials {@code explicit} by registry host (as in a reference: {@code docker.io}, {@code
   * ghcr.io}, {@code host:port}), then those of the docker config at {@code dockerConfig} (null:
   * none).
   */
  public RegistryCredentials(Map<String, Credentials> explicit, Path dockerConfig) {
    this(explicit, dockerConfig, null);
  }

  /** As above, with credential helpers run from {@code helperDirectory} (for tests). */
  RegistryCredentials(Map<String, Credentials> explicit, Path dockerConfig, Path helperDirectory) {
    this.explicit = Map.copyOf(explicit);
    this.dockerConfig = dockerConfig;
    this.helperDirectory = helperDirectory;
  }

  /** Explicit ones, then the docker config where the docker CLI looks for it. */
  public static RegistryCredentials fromEnvironment(Map<String, Credentials> explicit) {
    String dir = System.getenv("DOCKER_CONFIG");
    Path config =
        dir != null && !dir.isBlank()
            ? Path.of(dir, "config.json")
            : Path.of(System.getProperty("user.home"), ".docker", "config.json");
    return new RegistryCredentials(explicit, config);
  }

  /**
   * Parses {@code user:password} given for {@code host} on a command line or in a setting.
   *
   * @throws IllegalArgumentException if it has no {@code :} or an empty user
   */
  public static Credentials parseUserPassword(String userPassword, String source) {
    int colon = userPassword.indexOf(':');
    if (colon <= 0) {
      throw new IllegalArgumentException(source + " must be USER:PASSWORD");
    }
    return new Credentials(
        userPassword.substring(0, colon), userPassword.substring(colon + 1), null, source);
  }

  /** The credentials for registry {@code host}, if any are configured. */
  public Optional<Credentials> forHost(String host) {
    Credentials given = explicit.get(host);
    if (given != null) {
      return Optional.of(given);
    }
    if (dockerConfig == null) {
      return Optional.empty();
    }
    JsonNode config;
    try {
      config = JSON.readTree(Files.readAllBytes(dockerConfig));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new RegistryException("cannot read " + dockerConfig + ": " + e.getMessage(), e);
    }
    String helper = config.path("credHelpers").path(configKey(host)).asText(null);
    if (helper == null && host.equals(ImageReference.DOCKER_HUB)) {
      helper = config.path("credHelpers").path(DOCKER_HUB_KEY).asText(null);
    }
    if (helper == null) {
      helper = config.path("credsStore").asText(null);
    }
    if (helper != null && !helper.isEmpty()) {
      Optional<Credentials> fromHelper = fromHelper(helper, host);
      if (fromHelper.isPresent()) {
        return fromHelper;
      }
    }
    return fromAuths(config.path("auths"), host);
  }

  /** Docker keeps Docker Hub's entries under its v1 index URL. */
  private static String configKey(String host) {
    return host.equals(ImageReference.DOCKER_HUB) ? DOCKER_HUB_KEY : host;
  }

  /** An {@code auths} key as a host: {@code https://ghcr.io/v2/} → {@code ghcr.io}. */
  static String hostOfKey(String key) {
    String k = key.toLowerCase(Locale.ROOT);
    int scheme = k.indexOf("://");
    if (scheme >= 0) {
      k = k.substring(scheme + 3);
    }
    int slash = k.indexOf('/');
    if (slash >= 0) {
      k = k.substring(0, slash);
    }
    return k.equals("index.docker.io") || k.equals("registry-1.docker.io")
        ? ImageReference.DOCKER_HUB
        : k;
  }

  private Optional<Credentials> fromAuths(JsonNode auths, String host) {
    for (Iterator<Map.Entry<String, JsonNode>> it = auths.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> entry = it.next();
      if (!hostOfKey(entry.getKey()).equals(host)) {
        continue;
      }
      JsonNode auth = entry.getValue();
      String source = dockerConfig + " (auths." + entry.getKey() + ")";
      String identityToken = auth.path("identitytoken").asText("");
      if (!identityToken.isEmpty()) {
        return Optional.of(new Credentials(usernameIn(auth), null, identityToken, source));
      }
      String encoded = auth.path("auth").asText("");
      if (!encoded.isEmpty()) {
        String decoded;
        try {
          decoded = new String(Base64.getDecoder().decode(encoded), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
          throw new RegistryException(source + " is not valid base64");
        }
        return Optional.of(parseUserPassword(decoded, source));
      }
      String username = auth.path("username").asText("");
      if (!username.isEmpty()) {
        return Optional.of(
            new Credentials(username, auth.path("password").asText(""), null, source));
      }
    }
    return Optional.empty();
  }

  private static String usernameIn(JsonNode auth) {
    String encoded = auth.path("auth").asText("");
    if (!encoded.isEmpty()) {
      try {
        String decoded = new String(Base64.getDecoder().decode(encoded), StandardCharsets.UTF_8);
        int colon = decoded.indexOf(':');
        return colon > 0 ? decoded.substring(0, colon) : null;
      } catch (IllegalArgumentException e) {
        return null;
      }
    }
    return auth.path("username").asText(null);
  }

  /** Asks {@code docker-credential-NAME get} for {@code host}'s credentials. */
  private Optional<Credentials> fromHelper(String name, String host) {
    if (!HELPER.matcher(name).matches()) {
      throw new RegistryException(
          dockerConfig + " names credential helper '" + name + "', which is not a valid name");
    }
    String program =
        helperDirectory == null
            ? "docker-credential-" + name
            : helperDirectory.resolve("docker-credential-" + name).toString();
    String server = host.equals(ImageReference.DOCKER_HUB) ? DOCKER_HUB_KEY : host;
    Process p;
    try {
      p = new ProcessBuilder(program, "get").redirectError(ProcessBuilder.Redirect.DISCARD).start();
    } catch (IOException e) {
      throw new RegistryException(
          dockerConfig
              + " uses credential helper "
              + program
              + " for "
              + host
              + ", which cannot be run: "
              + e.getMessage(),
          e);
    }
    try {
      try (OutputStream in = p.getOutputStream()) {
        in.write(server.getBytes(StandardCharsets.UTF_8));
      }
      byte[] out;
      try (InputStream stdout = p.getInputStream()) {
        out = stdout.readNBytes(64 * 1024);
      }
      if (!p.waitFor(HELPER_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        throw new RegistryException(
            program + " get did not answer within " + HELPER_TIMEOUT_SECONDS + " s");
      }
      if (p.exitValue() != 0) {
        return Optional.empty(); // "credentials not found in native keychain"
      }
      JsonNode answer = JSON.readTree(out);
      String user = answer.path("Username").asText("");
      String secret = answer.path("Secret").asText("");
      if (secret.isEmpty()) {
        return Optional.empty();
      }
      String source = program;
      return Optional.of(
          user.equals("<token>")
              ? new Credentials(null, null, secret, source)
              : new Credentials(user, secret, null, source));
    } catch (IOException e) {
      throw new RegistryException(program + " get failed: " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RegistryException("interrupted while asking " + program, e);
    } finally {
      p.destroyForcibly();
    }
  }
}
