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

  /** Whether the daemon is Podman's: asked once, by the first call that needs to know. */
  private volatile Boolean podman;

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

  /**
   * Whether the daemon is Podman's Docker-compatible service rather than Docker's: its {@code
   * /version} lists a component named {@code Podman Engine}. Asked once per daemon; a failure to
   * ask is thrown (as {@link Unreachable} if it does not answer) and asked again next time.
   */
  boolean podman() {
    Boolean p = podman;
    if (p == null) {
      List<com.github.dockerjava.api.model.VersionComponent> components =
          client.versionCmd().exec().getComponents();
      p =
          components != null
              && components.stream().anyMatch(c -> "Podman Engine".equals(c.getName()));
      podman = p;
    }
    return p;
  }

  /**
   * The init that an exec's command runs under, as a subreaper, with the arguments before the
   * command's. Both daemons mount one into a container started with {@code Init}: Docker's is tini
   * at {@code /sbin/docker-init}, which needs {@code -s} to be a subreaper when not PID 1; Podman's
   * is catatonit at {@code /run/podman-init}, which has no {@code -s} and makes itself a subreaper
   * whenever it is not PID 1.
   */
  List<String> init() {
    return podman() ? List.of("/run/podman-init", "--") : List.of("/sbin/docker-init", "-s", "--");
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
    String execId;
    try {
      execId =
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
    } catch (com.github.dockerjava.api.exception.InternalServerErrorException e) {
      if (String.valueOf(e.getMessage()).contains("container state improper")) {
        // Podman's 500 for what Docker calls a 409: the container is stopped or paused
        throw new ConflictException(e.getMessage());
      }
      throw e;
    }
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
      awaitStarted(execId);
      return new ExecProcess(socket, body, name, () -> exitCode(execId));
    } catch (IOException e) {
      if (socket != null) {
        socket.close();
      }
      throw new WorkspaceUnavailableException(
          "cannot reach the Docker daemon at " + where() + ": " + e.getMessage(), e);
    }
  }

  /**
   * Waits until the daemon reports exec {@code execId}'s process running (or already ended): the
   * daemon answers the attach before it starts the process, and the container must not be paused
   * while the process is being set up (see {@code DockerSandbox.pausing}). Gives up quietly after
   * 10 s: the command's own end is reported as usual.
   */
  private void awaitStarted(String execId) {
    long deadline = System.nanoTime() + 10_000_000_000L;
    long sleepMillis = 0;
    while (System.nanoTime() < deadline) {
      InspectExecResponse r;
      try {
        r = client.inspectExecCmd(execId).exec();
      } catch (DockerException e) {
        return; // gone, or the daemon is: the command's end says so
      }
      if (Boolean.TRUE.equals(r.isRunning()) || r.getExitCodeLong() != null) {
        return;
      }
      try {
        Thread.sleep(sleepMillis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      sleepMillis = Math.min(20, sleepMillis * 2 + 1);
    }
  }

  private int exitCode(String execId) throws ExecProcess.Gone {
    InspectExecResponse r;
    try {
      r = client.inspectExecCmd(execId).exec();
    } catch (NotFoundException | Unreachable e) {
      throw new ExecProcess.Gone(e.getMessage()); // either way, no exit code will come
    } catch (com.github.dockerjava.api.exception.InternalServerErrorException e) {
      if (String.valueOf(e.getMessage()).contains("no such container")) {
        // Podman's 500 for an exec whose container is being removed
        throw new ExecProcess.Gone(e.getMessage());
      }
      throw e;
    }
    if (Boolean.TRUE.equals(r.isRunning()) || r.getExitCodeLong() == null) {
      return -1;
    }
    return (int) (long) r.getExitCodeLong();
  }

  /**
   * Imports a root filesystem tarball as {@code repository:tag}, with Dockerfile-style {@code
   * changes} ({@code USER}, {@code WORKDIR}, {@code ENV}, {@code LABEL}), which docker-java's
   * import cannot send. The whole reference goes in {@code repo}, as the docker CLI sends it:
   * Podman ignores a separate {@code tag} (the image would be {@code repository:latest}).
   */
  void importImage(String repository, String tag, List<String> changes, InputStream tarball)
      throws IOException {
    StringBuilder path = new StringBuilder("/images/create?fromSrc=-");
    path.append("&repo=").append(encode(repository + ":" + tag));
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

  /**
   * Commits {@code container} as a new image, paused for its duration, and returns the image's id;
   * named {@code reference} unless it is null. Labels go as Dockerfile {@code changes} ({@code
   * LABEL k=v}), which both daemons apply: Podman ignores the labels of the config that
   * docker-java's commit sends in the body.
   */
  String commit(String container, String reference, Map<String, String> labels) {
    StringBuilder path =
        new StringBuilder("/commit?pause=true&container=").append(encode(container));
    if (reference != null) {
      int colon = reference.lastIndexOf(':');
      path.append("&repo=").append(encode(reference.substring(0, colon)));
      path.append("&tag=").append(encode(reference.substring(colon + 1)));
    }
    for (Map.Entry<String, String> label : labels.entrySet()) {
      path.append("&changes=").append(encode("LABEL " + label.getKey() + "=" + label.getValue()));
    }
    String body = call("POST", path.toString(), "{}");
    try {
      return JSON.readTree(body).path("Id").asText();
    } catch (IOException e) {
      throw new DockerException("the daemon's answer to a commit is not JSON: " + body, 500);
    }
  }

  /**
   * Removes the name {@code reference} from its image, keeping the image (and the containers made
   * from it): Podman's own untag call, as it has no forced removal that only untags (its forced
   * removal removes those containers too). Podman stores a name with its registry ({@code
   * docker.io/}, {@code localhost/}), and untags only by that full name; its own calls answer only
   * under a version (4.0.0, the oldest it serves).
   *
   * @throws NotFoundException if no image has that name
   */
  void podmanUntag(String reference) {
    String[] stored =
        client.inspectImageCmd(reference).exec().getRepoTags().stream()
            .filter(t -> SandboxImages.shortName(t).equals(SandboxImages.shortName(reference)))
            .findFirst()
            .orElseThrow(() -> new NotFoundException("no image is named " + reference))
            .split(":(?=[^:/]*$)");
    call(
        "POST",
        "/v4.0.0/libpod/images/"
            + stored[0]
            + ":"
            + stored[1]
            + "/untag?repo="
            + encode(stored[0])
            + "&tag="
            + encode(stored[1]),
        null);
  }

  /**
   * One call of the daemon's API with docker-java's exceptions for its refusals (404, 409, others)
   * and {@link Unreachable} if it cannot be reached; returns the body of a success.
   */
  private String call(String method, String path, String json) {
    try (DaemonSocket socket = DaemonSocket.connect(found.host())) {
      socket.send(
          method,
          path,
          Map.of("Content-Type", "application/json"),
          json == null ? new byte[0] : json.getBytes(StandardCharsets.UTF_8),
          null);
      DaemonSocket.Head head = socket.readHead();
      String body = DaemonSocket.text(socket.body(head), 1 << 20);
      return switch (head.status()) {
        case 200, 201, 204 -> body;
        case 404 -> throw new NotFoundException(message(body));
        case 409 -> throw new ConflictException(message(body));
        default -> throw new DockerException(message(body), head.status());
      };
    } catch (IOException e) {
      throw new Unreachable(found.host(), new java.io.UncheckedIOException(e));
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
