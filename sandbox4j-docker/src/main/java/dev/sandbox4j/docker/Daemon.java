package dev.sandbox4j.docker;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.command.InspectExecResponse;
import com.github.dockerjava.api.exception.ConflictException;
import com.github.dockerjava.api.exception.DockerException;
import com.github.dockerjava.api.exception.NotFoundException;
import com.github.dockerjava.core.DefaultDockerClientConfig;
import com.github.dockerjava.core.DockerClientImpl;
import com.github.dockerjava.zerodep.ZerodepDockerHttpClient;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One Docker daemon: docker-java's client for the typed calls, and {@link DaemonSocket} for an
 * exec's attach and an import with {@code changes}. Thread-safe.
 */
final class Daemon implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final DockerHosts.Found found;
  private final DockerClient client;

  Daemon(DockerHosts.Found found) {
    this.found = found;
    URI host = found.host();
    DefaultDockerClientConfig config =
        DefaultDockerClientConfig.createDefaultConfigBuilder()
            .withDockerHost(host.toString())
            .withDockerTlsVerify(false)
            .build();
    ZerodepDockerHttpClient http =
        new ZerodepDockerHttpClient.Builder()
            .dockerHost(host)
            .maxConnections(64)
            .connectionTimeout(Duration.ofSeconds(10))
            .build();
    this.client = DockerClientImpl.getInstance(config, new Reached(http, host));
  }

  /**
   * The daemon could not be reached at all (no socket, connection refused, cut mid-call): a {@link
   * DockerException} with status 0, so that every place that handles the daemon's refusals handles
   * this too, as an unavailable workspace.
   */
  static final class Unreachable extends DockerException {
    Unreachable(URI host, RuntimeException cause) {
      super("cannot reach the Docker daemon at " + host + ": " + rootMessage(cause), 0, cause);
    }

    private static String rootMessage(Throwable e) {
      Throwable root = e;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      return root.getMessage() != null ? root.getMessage() : root.toString();
    }
  }

  /** The transport, with its failures to reach the daemon as {@link Unreachable}. */
  private record Reached(com.github.dockerjava.transport.DockerHttpClient http, URI host)
      implements com.github.dockerjava.transport.DockerHttpClient {
    @Override
    public Response execute(Request request) {
      try {
        return http.execute(request);
      } catch (DockerException e) {
        throw e;
      } catch (RuntimeException e) {
        throw new Unreachable(host, e);
      }
    }

    @Override
    public void close() throws IOException {
      http.close();
    }
  }

  DockerClient client() {
    return client;
  }

  URI host() {
    return found.host();
  }

  /** Where the daemon was found, for messages. */
  String where() {
    return found.host() + " (" + found.how() + ")";
  }

  /**
   * Creates an exec in {@code container} and attaches to it, stdin open.
   *
   * @throws NotFoundException if the container does not exist
   * @throws ConflictException if it is paused or not running
   */
  ExecProcess exec(
      String container,
      List<String> argv,
      List<String> env,
      String workingDir,
      String user,
      String name) {
    String execId =
        client
            .execCreateCmd(container)
            .withCmd(argv.toArray(String[]::new))
            .withEnv(env)
            .withWorkingDir(workingDir)
            .withUser(user)
            .withAttachStdin(true)
            .withAttachStdout(true)
            .withAttachStderr(true)
            .withTty(false)
            .exec()
            .getId();
    DaemonSocket socket = null;
    try {
      socket = DaemonSocket.connect(found.host());
      Map<String, String> headers = new LinkedHashMap<>();
      headers.put("Content-Type", "application/json");
      headers.put("Connection", "Upgrade");
      headers.put("Upgrade", "tcp");
      socket.send(
          "POST",
          "/exec/" + execId + "/start",
          headers,
          "{\"Detach\":false,\"Tty\":false}".getBytes(StandardCharsets.UTF_8),
          null);
      DaemonSocket.Head head = socket.readHead();
      InputStream body = socket.body(head);
      if (head.status() != 101 && head.status() != 200) {
        String message = message(DaemonSocket.text(body, 4096));
        socket.close();
        if (head.status() == 404) {
          throw new NotFoundException(message);
        }
        if (head.status() == 409) {
          throw new ConflictException(message);
        }
        throw new WorkspaceException("the Docker daemon refused to start the command: " + message);
      }
      return new ExecProcess(socket, body, name, () -> exitCode(execId));
    } catch (IOException e) {
      if (socket != null) {
        socket.close();
      }
      throw new WorkspaceUnavailableException(
          "cannot reach the Docker daemon at " + where() + ": " + e.getMessage(), e);
    }
  }

  private int exitCode(String execId) throws ExecProcess.Gone {
    InspectExecResponse r;
    try {
      r = client.inspectExecCmd(execId).exec();
    } catch (NotFoundException | Unreachable e) {
      throw new ExecProcess.Gone(e.getMessage()); // either way, no exit code will come
    }
    if (Boolean.TRUE.equals(r.isRunning()) || r.getExitCodeLong() == null) {
      return -1;
    }
    return (int) (long) r.getExitCodeLong();
  }

  /**
   * Imports a root filesystem tarball as {@code repository:tag}, with Dockerfile-style {@code
   * changes} ({@code USER}, {@code WORKDIR}, {@code ENV}, {@code LABEL}), which docker-java's
   * import cannot send.
   */
  void importImage(String repository, String tag, List<String> changes, InputStream tarball)
      throws IOException {
    StringBuilder path = new StringBuilder("/images/create?fromSrc=-");
    path.append("&repo=").append(encode(repository)).append("&tag=").append(encode(tag));
    for (String change : changes) {
      path.append("&changes=").append(encode(change));
    }
    try (DaemonSocket socket = DaemonSocket.connect(found.host())) {
      socket.send(
          "POST", path.toString(), Map.of("Content-Type", "application/x-tar"), null, tarball);
      DaemonSocket.Head head = socket.readHead();
      String body = DaemonSocket.text(socket.body(head), 1 << 20);
      if (head.status() != 200) {
        throw new IOException("the Docker daemon refused the import: " + message(body));
      }
      // progress is JSON lines; an error arrives as {"error": ...} with status 200
      for (String line : body.split("\n")) {
        if (line.contains("\"error\"")) {
          throw new IOException(
              "the Docker daemon failed the import: "
                  + JSON.readTree(line).path("error").asText(line));
        }
      }
    }
  }

  private static String encode(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  private static String message(String body) {
    try {
      return JSON.readTree(body).path("message").asText(body.strip());
    } catch (IOException e) {
      return body.strip();
    }
  }

  /** A daemon error as the workspace exception that says what it means for the caller. */
  static RuntimeException translate(String what, DockerException e) {
    if (e instanceof NotFoundException || e instanceof Unreachable) {
      return new WorkspaceUnavailableException(what + ": " + e.getMessage(), e);
    }
    return new WorkspaceException(what + ": " + e.getMessage(), e);
  }

  @Override
  public void close() {
    try {
      client.close();
    } catch (IOException e) {
      // closing pooled connections
    }
  }
}
