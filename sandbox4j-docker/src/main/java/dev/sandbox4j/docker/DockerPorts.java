package dev.sandbox4j.docker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.ports.PortTargets;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Docker sandboxes as the engine's port proxy sees them ({@link PortTargets}): their directories in
 * the {@link DockerHome}, and their containers reached at their address on the {@link
 * DockerNetwork} from the host. Speaks to the daemon with plain calls ({@link DaemonSocket#call}),
 * as the supervisor that runs it has no docker-java.
 *
 * <p>Unlike the local engine's, a port URL reaches what listens on the container's network address,
 * not on its loopback: a server bound to {@code 127.0.0.1} inside is not reachable.
 */
final class DockerPorts implements PortTargets {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final URI host;
  private final DockerHome home;

  DockerPorts(URI host, DockerHome home) {
    this.host = host;
    this.home = home;
  }

  @Override
  public Path home() {
    return home.dir();
  }

  @Override
  public Path sandboxes() {
    return home.sandboxes();
  }

  @Override
  public Path dir(String id) {
    return home.sandbox(id);
  }

  @Override
  public boolean isAlive(String id) {
    return Files.isDirectory(dir(id)) && container(id).isPresent();
  }

  @Override
  public void touch(String id) {
    Timers.touch(dir(id));
  }

  @Override
  public void wake(String id) {
    JsonNode state =
        container(id).orElseThrow(() -> unavailable(id, "its container is gone")).path("State");
    try {
      if (state.path("Paused").asBoolean()) {
        DaemonSocket.call(host, "POST", "/containers/" + name(id) + "/unpause");
      } else if (!state.path("Running").asBoolean()) {
        DaemonSocket.call(host, "POST", "/containers/" + name(id) + "/start");
      }
    } catch (IOException e) {
      throw unavailable(id, "cannot reach its Docker daemon at " + host + ": " + e.getMessage());
    }
  }

  @Override
  public SocketChannel connect(String id, int port) throws IOException {
    JsonNode container =
        container(id).orElseThrow(() -> new NotRunning("docker:" + id + " is gone", null));
    if (!container.path("State").path("Running").asBoolean()) {
      throw new NotRunning("docker:" + id + " is not running", null);
    }
    String address =
        container
            .path("NetworkSettings")
            .path("Networks")
            .path(DockerNetwork.NAME)
            .path("IPAddress")
            .asText("");
    if (address.isEmpty()) {
      throw new NotRunning("docker:" + id + " is not on the network " + DockerNetwork.NAME, null);
    }
    return SocketChannel.open(new InetSocketAddress(InetAddress.ofLiteral(address), port));
  }

  @Override
  public String ref(String id) {
    return "docker:" + id;
  }

  @Override
  public String listenHint() {
    return "0.0.0.0 (its network address, not only its loopback)";
  }

  @Override
  public WorkspaceUnavailableException unavailable(String id, String why) {
    return new WorkspaceUnavailableException("sandbox docker:" + id + " is unavailable: " + why);
  }

  /** The container's inspection, empty if it is gone; the daemon's failures are I/O. */
  private Optional<JsonNode> container(String id) {
    try {
      DaemonSocket.Reply r = DaemonSocket.call(host, "GET", "/containers/" + name(id) + "/json");
      if (r.status() == 404) {
        return Optional.empty();
      }
      if (r.status() != 200) {
        throw unavailable(id, "its Docker daemon answered " + r.status() + ": " + r.body());
      }
      JsonNode node = JSON.readTree(r.body());
      String label = node.path("Config").path("Labels").path(DockerSandbox.LABEL_ID).asText("");
      return label.equals(id) ? Optional.of(node) : Optional.empty();
    } catch (IOException e) {
      throw unavailable(id, "cannot reach its Docker daemon at " + host + ": " + e.getMessage());
    }
  }

  private static String name(String id) {
    return "sandbox4j-" + DockerHome.checkId(id);
  }
}
