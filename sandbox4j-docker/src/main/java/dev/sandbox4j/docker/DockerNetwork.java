package dev.sandbox4j.docker;

import com.github.dockerjava.api.exception.ConflictException;
import com.github.dockerjava.api.exception.DockerException;
import com.github.dockerjava.api.exception.NotFoundException;
import com.github.dockerjava.api.model.Network;
import dev.sandbox4j.runtime.internal.net.Nftables;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;

/**
 * The one network every networked docker sandbox of a daemon is on, and the host firewall that
 * makes the egress proxy its only way out.
 *
 * <p>The network, {@value #NAME}, is a bridge that Docker itself keeps from forwarding anywhere
 * ({@code Internal}) and whose containers cannot reach each other ({@code enable_icc=false}); its
 * bridge device is {@value #BRIDGE}. What an internal network still lets a container reach is the
 * host, at the bridge's address (the gateway): every port the host listens on. So the engine adds
 * its own nftables table ({@link BridgeFirewall}): from {@value #BRIDGE} the host accepts only the
 * egress proxy's port and the DNS stub's (both bound to the gateway by the {@link
 * DockerSupervisor}) and replies to its own connections, rejects the rest, and forwards nothing
 * (also not to the local engine's sandboxes, whose own forwarding rules would otherwise let it
 * through).
 *
 * <p>Sandboxes get the gateway as their DNS server: Docker's resolver in the container forwards
 * names it does not know there, from the container's side, where the supervisor's stub answers that
 * no name exists. (Docker 20.10 forwards even for internal networks, CVE-2024-29018; from the
 * host's side when the host's resolver is on loopback, which pointing it at the gateway avoids.)
 *
 * <p>All of it needs the daemon's networks on this host and root here: the proxy binds the
 * gateway's address, and the firewall is this host's. A daemon elsewhere (Docker Desktop's VM,
 * rootless Docker's own namespace, a {@code tcp://} daemon) has no gateway here: {@link #ensure}
 * then says so, and a sandbox there gets no network or Docker's own bridge, as the builder says.
 */
final class DockerNetwork {
  static final String NAME = "sandbox4j-egress";
  static final String BRIDGE = "sandbox4j0";
  static final int PROXY_PORT = 3128;
  static final int DNS_PORT = 53;
  static final String LABEL = "dev.sandbox4j.network";
  static final String EGRESS_KIND = "egress";
  static final String NAMED_KIND = "named";

  /**
   * The daemon network of named network {@code name} ({@link DockerSandbox.Builder#network}). Its
   * name must sort before {@value #NAME}: Docker attaches a container's networks in the order of
   * their names, and its resolver answers a member's host name (its id) with the address on the
   * asker's first network that has it, which must be the named network (on the egress network the
   * members cannot reach each other). Measured on Docker 20.10.
   */
  static String namedNetwork(String name) {
    return "sandbox4j-a-" + name;
  }

  /** The network as it is on the daemon: its gateway (the host's end) and subnet. */
  record Ready(InetAddress gateway, String subnet) {
    String proxyUrl() {
      return "http://" + gateway.getHostAddress() + ":" + PROXY_PORT;
    }
  }

  private DockerNetwork() {}

  /**
   * Makes the network if the daemon lacks it and the firewall if this host lacks it; returns the
   * gateway, or throws naming why this daemon cannot have it.
   */
  static Ready ensure(Daemon daemon) {
    Optional<String> whyNot = hostCannot();
    if (whyNot.isPresent()) {
      throw new Unavailable(whyNot.get());
    }
    boolean podman;
    try {
      podman = daemon.podman();
    } catch (DockerException e) {
      throw Daemon.translate("cannot ask the daemon at " + daemon.where() + " what it is", e);
    }
    if (podman) {
      // measured on Podman 4.3: an internal network gets no gateway on the host, so the proxy has
      // no address its containers reach; and its bridge options differ (no enable_icc)
      throw new Unavailable(
          "the daemon at "
              + daemon.where()
              + " is Podman, whose internal networks have no gateway on the host for the egress"
              + " proxy (egress policies, port URLs and named networks are Docker's only for now)");
    }
    Network network = inspectOrCreate(daemon, NAME, false, BRIDGE, EGRESS_KIND);
    Ready ready = ready(network, daemon);
    Optional<String> bridge = BridgeFirewall.interfaceWith(ready.gateway());
    if (bridge.isEmpty()) {
      throw new Unavailable(
          "the Docker daemon at "
              + daemon.where()
              + " does not run on this host's network (its network "
              + NAME
              + "'s gateway "
              + ready.gateway().getHostAddress()
              + " is not an address of this host: Docker Desktop, rootless Docker or a remote"
              + " daemon; or its bridge was deleted, and `docker network rm "
              + NAME
              + "` lets Sandbox4j make it anew)");
    }
    refreshFirewall(daemon);
    return ready;
  }

  /**
   * Makes named network {@code name}'s daemon network if missing (internal, its members reaching
   * each other) and puts its bridge under the host's firewall; returns the daemon network's name.
   * Call after {@link #ensure}, which checked that this host can have our networks.
   */
  static String ensureNamed(Daemon daemon, String name) {
    String network = namedNetwork(name);
    String bridge = "sbx" + HexFormat.of().formatHex(digest(name), 0, 5);
    Network made = inspectOrCreate(daemon, network, true, bridge, NAMED_KIND);
    if (!Boolean.TRUE.equals(made.getInternal())) {
      throw new Unavailable(
          "the network "
              + network
              + " on "
              + daemon.where()
              + " is not internal (made by someone"
              + " else?); remove it and Sandbox4j makes its own");
    }
    refreshFirewall(daemon);
    return network;
  }

  private static byte[] digest(String s) {
    try {
      return java.security.MessageDigest.getInstance("SHA-256")
          .digest(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void refreshFirewall(Daemon daemon) {
    try {
      BridgeFirewall.refresh(daemon.host());
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot set the host's firewall for the docker sandboxes' networks: " + e.getMessage(),
          e);
    }
  }

  /** Why no egress network is possible from this process at all, if so. */
  static Optional<String> hostCannot() {
    if (!System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).contains("linux")) {
      return Optional.of("this host is not Linux");
    }
    try {
      Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
      if (!Integer.valueOf(0).equals(uid)) {
        return Optional.of(
            "this process is not root (it binds the proxy on the gateway and sets"
                + " the host's firewall)");
      }
    } catch (IOException | UnsupportedOperationException e) {
      return Optional.of("cannot tell this process's user: " + e.getMessage());
    }
    return Nftables.unavailable();
  }

  /** A daemon that cannot have the egress network, with the reason. */
  static final class Unavailable extends WorkspaceException {
    private static final long serialVersionUID = 1L;

    Unavailable(String why) {
      super(why);
    }
  }

  private static Network inspectOrCreate(
      Daemon daemon, String name, boolean icc, String bridge, String kind) {
    for (int attempt = 0; ; attempt++) {
      try {
        return daemon.client().inspectNetworkCmd().withNetworkId(name).exec();
      } catch (NotFoundException missing) {
        try {
          daemon
              .client()
              .createNetworkCmd()
              .withName(name)
              .withDriver("bridge")
              .withInternal(true)
              .withCheckDuplicate(true)
              .withOptions(
                  Map.of(
                      "com.docker.network.bridge.enable_icc",
                      Boolean.toString(icc),
                      "com.docker.network.bridge.name",
                      bridge))
              .withLabels(Map.of(LABEL, kind))
              .exec();
        } catch (ConflictException raced) {
          // another JVM made it meanwhile
        } catch (DockerException e) {
          if (attempt > 0) {
            throw Daemon.translate("cannot create the sandboxes' network " + name, e);
          }
        }
      } catch (DockerException e) {
        throw Daemon.translate("cannot inspect the sandboxes' network " + name, e);
      }
      if (attempt > 2) {
        throw new WorkspaceException(
            "cannot create the sandboxes' network " + name + " on " + daemon.where());
      }
    }
  }

  private static Ready ready(Network network, Daemon daemon) {
    boolean internal = Boolean.TRUE.equals(network.getInternal());
    String icc =
        network.getOptions() == null
            ? null
            : network.getOptions().get("com.docker.network.bridge.enable_icc");
    if (!internal || !"false".equals(icc)) {
      // someone made a network of that name that is not ours: never put a sandbox on it
      throw new Unavailable(
          "the network "
              + NAME
              + " on "
              + daemon.where()
              + " is not internal with enable_icc=false (made by someone else?); remove it and"
              + " Sandbox4j makes its own");
    }
    var configs = network.getIpam() == null ? null : network.getIpam().getConfig();
    if (configs == null || configs.isEmpty() || configs.get(0).getGateway() == null) {
      throw new WorkspaceException("the network " + NAME + " has no IPv4 gateway");
    }
    try {
      return new Ready(
          InetAddress.getByName(configs.get(0).getGateway()), configs.get(0).getSubnet());
    } catch (IOException e) {
      throw new WorkspaceException("the network " + NAME + "'s gateway is not an address", e);
    }
  }
}
