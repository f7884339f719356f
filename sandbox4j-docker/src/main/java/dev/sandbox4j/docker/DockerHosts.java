package dev.sandbox4j.docker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Finds the daemon the way the docker CLI does: {@code DOCKER_HOST}; else the current context
 * ({@code DOCKER_CONTEXT}, else {@code currentContext} in {@code $DOCKER_CONFIG/config.json}) and
 * its endpoint in {@code contexts/meta/<sha256 of the name>/meta.json}; else the first socket that
 * exists of the system daemon's, rootless Docker's ({@code $XDG_RUNTIME_DIR/docker.sock}), Docker
 * Desktop's ({@code ~/.docker/run/docker.sock}, {@code ~/.docker/desktop/docker.sock}) and Podman's
 * (rootless, then system).
 */
final class DockerHosts {
  private static final ObjectMapper JSON = new ObjectMapper();

  private DockerHosts() {}

  /** Where the daemon was found, and how (for errors and {@code doctor}). */
  record Found(URI host, String how) {}

  /** The daemon for this process's environment and home. */
  static Found discover() {
    return discover(System.getenv(), Path.of(System.getProperty("user.home")));
  }

  /**
   * The daemon that {@code env} and the home {@code home} point at.
   *
   * @throws WorkspaceUnavailableException if none is configured and no known socket exists
   */
  static Found discover(Map<String, String> env, Path home) {
    String tls = env.getOrDefault("DOCKER_TLS_VERIFY", "");
    if (!tls.isEmpty() && !tls.equals("0")) {
      throw new WorkspaceUnavailableException(
          "DOCKER_TLS_VERIFY is set, but the docker provider does not speak TLS to a daemon yet:"
              + " use the daemon's unix socket, or an SSH tunnel to it");
    }
    String dockerHost = env.get("DOCKER_HOST");
    if (dockerHost != null && !dockerHost.isBlank()) {
      return new Found(parse(dockerHost, "DOCKER_HOST"), "DOCKER_HOST");
    }
    Path config =
        env.containsKey("DOCKER_CONFIG") && !env.get("DOCKER_CONFIG").isBlank()
            ? Path.of(env.get("DOCKER_CONFIG"))
            : home.resolve(".docker");
    Optional<String> context = currentContext(env, config);
    if (context.isPresent()) {
      Path meta =
          config.resolve("contexts/meta").resolve(sha256(context.get())).resolve("meta.json");
      try {
        JsonNode endpoint = JSON.readTree(meta.toFile()).path("Endpoints").path("docker");
        String host = endpoint.path("Host").asText("");
        if (host.isEmpty()) {
          throw new WorkspaceUnavailableException(
              "the docker context '" + context.get() + "' has no Docker endpoint in " + meta);
        }
        return new Found(
            parse(host, "the docker context '" + context.get() + "'"), "context " + context.get());
      } catch (IOException e) {
        throw new WorkspaceUnavailableException(
            "the current docker context is '"
                + context.get()
                + "', but its description "
                + meta
                + " cannot be read: "
                + e.getMessage(),
            e);
      }
    }
    List<Path> sockets = candidates(env, home);
    for (Path socket : sockets) {
      if (Files.exists(socket)) {
        return new Found(URI.create("unix://" + socket), "socket " + socket);
      }
    }
    throw new WorkspaceUnavailableException(
        "no Docker daemon found: DOCKER_HOST is not set, no docker context is selected, and none of"
            + " these sockets exists: "
            + sockets
            + ". Start Docker (or Podman's 'podman system service'), or set DOCKER_HOST.");
  }

  /** The sockets tried in order when nothing is configured. */
  static List<Path> candidates(Map<String, String> env, Path home) {
    List<Path> sockets = new ArrayList<>();
    sockets.add(Path.of("/var/run/docker.sock"));
    String runtimeDir = env.get("XDG_RUNTIME_DIR");
    if (runtimeDir != null && !runtimeDir.isBlank()) {
      sockets.add(Path.of(runtimeDir, "docker.sock"));
    }
    sockets.add(home.resolve(".docker/run/docker.sock"));
    sockets.add(home.resolve(".docker/desktop/docker.sock"));
    if (runtimeDir != null && !runtimeDir.isBlank()) {
      sockets.add(Path.of(runtimeDir, "podman/podman.sock"));
    }
    sockets.add(Path.of("/run/podman/podman.sock"));
    return sockets;
  }

  private static Optional<String> currentContext(Map<String, String> env, Path config) {
    String name = env.get("DOCKER_CONTEXT");
    if (name == null || name.isBlank()) {
      Path file = config.resolve("config.json");
      if (!Files.isRegularFile(file)) {
        return Optional.empty();
      }
      try {
        name = JSON.readTree(file.toFile()).path("currentContext").asText("");
      } catch (IOException e) {
        throw new WorkspaceUnavailableException(
            "the docker CLI's configuration " + file + " cannot be read: " + e.getMessage(), e);
      }
    }
    return name.isBlank() || name.equals("default") ? Optional.empty() : Optional.of(name);
  }

  private static URI parse(String host, String where) {
    URI uri;
    try {
      uri = URI.create(host.strip());
    } catch (IllegalArgumentException e) {
      throw new WorkspaceUnavailableException(where + " is not a daemon address: " + host, e);
    }
    String scheme = uri.getScheme();
    if (scheme == null || !(scheme.equals("unix") || scheme.equals("tcp"))) {
      throw new WorkspaceUnavailableException(
          where
              + " is "
              + host
              + ": only unix:///path and tcp://host:port daemons are supported (not ssh://,"
              + " npipe:// nor TLS)");
    }
    return uri;
  }

  private static String sha256(String text) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
