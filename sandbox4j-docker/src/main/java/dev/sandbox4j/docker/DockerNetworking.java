package dev.sandbox4j.docker;

import com.github.dockerjava.api.model.HostConfig;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.ports.PortForwards;
import dev.sandbox4j.runtime.internal.ports.PortTokens;
import dev.sandbox4j.runtime.internal.ports.PortUrls;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A docker sandbox's network as {@link DockerSandbox} shows it: which network a new container gets
 * ({@link Mode}), its egress policy (kept in the {@link DockerHome}, enforced by the supervisor's
 * proxy), its port URLs and TCP forwards. {@link DockerSandbox} documents each operation.
 */
final class DockerNetworking {
  /** A new sandbox's network. */
  enum Mode {
    /** On the {@link DockerNetwork}: out only through the egress proxy, under a policy. */
    EGRESS,
    /** No network at all ({@code NetworkMode=none}): loopback only, for good. */
    NONE,
    /** Docker's default bridge: Docker's isolation only (the host and its networks reachable). */
    BRIDGE
  }

  private final DockerSandbox sandboxes;
  private final Mode mode;
  private final EgressPolicy policy;
  private final boolean portToken;
  private final List<String> named;
  private volatile DockerNetwork.Ready ready;

  /** The label listing a container's named networks, comma-separated. */
  static final String LABEL_NETWORKS = "dev.sandbox4j.networks";

  DockerNetworking(
      DockerSandbox sandboxes,
      Mode mode,
      EgressPolicy policy,
      boolean portToken,
      List<String> named) {
    this.sandboxes = sandboxes;
    this.mode = mode;
    this.policy = policy;
    this.portToken = portToken;
    this.named = named;
  }

  // ---- named networks -----------------------------------------------------------------------

  /** The named networks of a new sandbox: its parent's for a fork, else this provider's. */
  List<String> namedNetworksFor(String parent) {
    return parent == null ? named : namedNetworksOf(sandboxes.inspect(parent));
  }

  private static List<String> namedNetworksOf(
      com.github.dockerjava.api.command.InspectContainerResponse c) {
    Map<String, String> labels = c.getConfig().getLabels();
    String list = labels == null ? "" : labels.getOrDefault(LABEL_NETWORKS, "");
    return list.isEmpty() ? List.of() : List.of(list.split(","));
  }

  /**
   * Puts created (not yet started) container {@code id} on its named networks, each made if
   * missing, with its id as its name there.
   */
  void join(String id, List<String> networks) {
    if (networks.isEmpty()) {
      return;
    }
    ready(); // this host can have our networks (the firewall covers each bridge)
    for (String name : networks) {
      connect(id, DockerNetwork.ensureNamed(sandboxes.daemon(), name), id);
    }
  }

  private void connect(String id, String network, String alias) {
    var endpoint = new com.github.dockerjava.api.model.ContainerNetwork();
    if (alias != null) {
      endpoint.withAliases(alias);
    }
    try {
      sandboxes
          .daemon()
          .client()
          .connectToNetworkCmd()
          .withNetworkId(network)
          .withContainerId(sandboxes.containerName(id))
          .withContainerNetwork(endpoint)
          .exec();
    } catch (com.github.dockerjava.api.exception.DockerException e) {
      throw Daemon.translate("cannot put sandbox docker:" + id + " on network " + network, e);
    }
  }

  /** Removes the daemon networks of named networks that no container is on (gc). */
  void removeUnusedNamedNetworks() {
    var client = sandboxes.daemon().client();
    try {
      for (var network :
          client
              .listNetworksCmd()
              .withFilter("label", List.of(DockerNetwork.LABEL + "=" + DockerNetwork.NAMED_KIND))
              .exec()) {
        var containers = client.inspectNetworkCmd().withNetworkId(network.getId()).exec();
        if (containers.getContainers() == null || containers.getContainers().isEmpty()) {
          try {
            client.removeNetworkCmd(network.getId()).exec();
          } catch (com.github.dockerjava.api.exception.DockerException inUseOrGone) {
            // a container joined it meanwhile, or another gc removed it
          }
        }
      }
    } catch (com.github.dockerjava.api.exception.DockerException e) {
      throw Daemon.translate("cannot look for unused named networks", e);
    }
  }

  /**
   * Refuses to {@code what} sandbox {@code id} if it is on a named network this provider was not
   * built with, as the local engine does: a provider without it cannot reach into that network.
   */
  void checkAccess(
      String id, com.github.dockerjava.api.command.InspectContainerResponse c, String what) {
    List<String> foreign = namedNetworksOf(c).stream().filter(n -> !named.contains(n)).toList();
    if (!foreign.isEmpty()) {
      throw new WorkspaceException(
          "refusing to "
              + what
              + " docker:"
              + id
              + ": it is on named network "
              + String.join(", ", foreign)
              + ", and this DockerSandbox was built without it (use"
              + " DockerSandbox.builder().network(\""
              + foreign.getFirst()
              + "\"))");
    }
  }

  boolean onEgressNetwork() {
    return mode == Mode.EGRESS;
  }

  private DockerHome home() {
    return DockerHome.of(sandboxes.daemon().host());
  }

  /** The network once per provider: made, and the host's firewall set, on the first create. */
  private DockerNetwork.Ready ready() {
    DockerNetwork.Ready r = ready;
    if (r == null) {
      synchronized (this) {
        if (ready == null) {
          try {
            ready = DockerNetwork.ensure(sandboxes.daemon());
          } catch (DockerNetwork.Unavailable e) {
            throw new WorkspaceException(
                "cannot give a docker sandbox its egress network: "
                    + e.getMessage()
                    + ". Build the provider with egress(EgressPolicy.none()) (CLI: --egress none)"
                    + " for no network, or bridgeNetwork() for Docker's own bridge (which reaches"
                    + " the host and its networks)",
                e);
          }
        }
        r = ready;
      }
    }
    return r;
  }

  /**
   * Prepares sandbox {@code id}'s network before its container is created: its state (policy,
   * token) for the egress network, which {@code fromParent} (a fork's parent) gives its policy;
   * sets the container's network and DNS in {@code host}; returns the variables its commands get.
   */
  Map<String, String> prepare(String id, String fromParent, HostConfig host) {
    switch (mode) {
      case NONE -> {
        host.withNetworkMode("none");
        return Map.of();
      }
      case BRIDGE -> {
        return Map.of();
      }
      default -> {
        // below
      }
    }
    DockerNetwork.Ready net = ready();
    DockerHome home = home();
    EgressPolicy first = fromParent == null ? policy : home.policy(fromParent).orElse(policy);
    home.createSandbox(id, first);
    try {
      boolean token =
          fromParent == null
              ? portToken
              : Files.exists(home.sandbox(fromParent).resolve("port-token"));
      if (token) {
        PortTokens.writeNewToken(home.sandbox(id));
      }
    } catch (IOException e) {
      home.removeSandbox(id);
      throw new WorkspaceException("cannot write the port token of docker:" + id + ": " + e, e);
    }
    DockerSupervisor.ensureRunning(home, sandboxes.daemon().host());
    host.withNetworkMode(DockerNetwork.NAME).withDns(net.gateway().getHostAddress());
    // Everything leaves through the proxy: clients that honour these variables use it for every
    // name; nothing else has a way out (no route, no DNS).
    Map<String, String> env = new LinkedHashMap<>();
    for (String name : List.of("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")) {
      env.put(name, net.proxyUrl());
    }
    env.put("NO_PROXY", "localhost,127.0.0.1,::1");
    env.put("no_proxy", "localhost,127.0.0.1,::1");
    env.put("NODE_EXTRA_CA_CERTS", Networks.CA_FILE);
    return env;
  }

  /**
   * After its container started: the proxy serving (a supervisor started for this create needs a
   * moment, and the sandbox's first request must not find nothing there) and its CA installed if
   * sandbox {@code id}'s policy needs it.
   */
  void started(String id) {
    if (home().policy(id).isEmpty()) {
      return;
    }
    awaitProxy(ready());
    installCaIfIntercepting(id);
  }

  /** A sandbox attached to by ref: its supervisor started again if it died (a reboot, a kill). */
  void attached(String id) {
    DockerHome home = home();
    if (Files.exists(home.sandbox(id).resolve(DockerHome.POLICY_FILE))) {
      DockerSupervisor.ensureRunning(home, sandboxes.daemon().host());
    }
  }

  private static final long PROXY_WAIT_NANOS = 30_000_000_000L;
  private static final long SUPERVISOR_CHECK_NANOS = 1_000_000_000L;

  private void awaitProxy(DockerNetwork.Ready net) {
    long deadline = System.nanoTime() + PROXY_WAIT_NANOS;
    long nextCheck = System.nanoTime() + SUPERVISOR_CHECK_NANOS;
    java.net.InetSocketAddress proxy =
        new java.net.InetSocketAddress(net.gateway(), DockerNetwork.PROXY_PORT);
    while (true) {
      try (java.net.Socket s = new java.net.Socket()) {
        s.connect(proxy, 200);
        return;
      } catch (IOException notYet) {
        if (System.nanoTime() > nextCheck) {
          // The supervisor this create found running may have been exiting: it had no sandbox
          // with state when it last looked (its linger ended), and nobody started another.
          nextCheck = System.nanoTime() + SUPERVISOR_CHECK_NANOS;
          DockerSupervisor.ensureRunning(home(), sandboxes.daemon().host());
        }
        if (System.nanoTime() > deadline) {
          throw new WorkspaceException(
              "the egress proxy of the Docker daemon's sandboxes does not answer on "
                  + proxy
                  + " after 30 s: see "
                  + home().dir().resolve(DockerSupervisor.LOG_FILE),
              notYet);
        }
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new WorkspaceException("interrupted while waiting for the egress proxy", e);
      }
    }
  }

  /** Removes what {@link #prepare} made for {@code id}; quiet if nothing. */
  void forget(String id) {
    home().removeSandbox(id);
  }

  void setEgress(String id, EgressPolicy newPolicy) {
    sandboxes.inspect(id); // unavailable if gone
    DockerHome home = home();
    if (home.policy(id).isEmpty()) {
      throw noPolicy(id);
    }
    try {
      home.writePolicy(id, newPolicy);
    } catch (IOException e) {
      throw new WorkspaceException("cannot write the egress policy of docker:" + id + ": " + e, e);
    }
    if (newPolicy.interceptTls()) {
      sandboxes.wake(id);
      installCaIfIntercepting(id);
    }
  }

  EgressPolicy egress(String id) {
    var container = sandboxes.inspect(id); // unavailable if gone
    Optional<EgressPolicy> p = home().policy(id);
    if (p.isPresent()) {
      return p.get();
    }
    if ("none".equals(container.getHostConfig().getNetworkMode())) {
      return EgressPolicy.none();
    }
    throw noPolicy(id);
  }

  private static WorkspaceException noPolicy(String id) {
    return new WorkspaceException(
        "sandbox docker:"
            + id
            + " is not on the egress network (made with noNetwork() or bridgeNetwork()): it has no"
            + " egress policy to read or change");
  }

  URI url(String id, int port) {
    PortUrls.checkPort(port);
    DockerHome home = servedHome(id);
    return PortUrls.url(PortUrls.port(home.dir()), id, port);
  }

  Optional<String> portToken(String id) {
    return PortTokens.token(servedHome(id).sandbox(id));
  }

  int forwardTcp(String id, int port) {
    PortUrls.checkPort(port);
    DockerHome home = servedHome(id);
    URI host = sandboxes.daemon().host();
    return PortForwards.forward(
        new DockerPorts(host, home), id, port, DockerSupervisor.isRunning(home));
  }

  /** The home of an existing sandbox on the egress network, its supervisor started. */
  private DockerHome servedHome(String id) {
    sandboxes.inspect(id); // unavailable if gone
    DockerHome home = home();
    if (home.policy(id).isEmpty()) {
      throw new WorkspaceException(
          "sandbox docker:"
              + id
              + " is not on the egress network (made with noNetwork() or bridgeNetwork()): the"
              + " port proxy cannot reach it");
    }
    DockerSupervisor.ensureRunning(home, sandboxes.daemon().host());
    return home;
  }

  /**
   * Installs the proxy's CA into the sandbox's trust store, as root, if its policy intercepts TLS:
   * the local engine's steps ({@link Networks#installCaArgv}).
   */
  private void installCaIfIntercepting(String id) {
    Optional<EgressPolicy> p = home().policy(id);
    if (p.isEmpty() || !p.get().interceptTls()) {
      return;
    }
    String pem;
    try {
      pem = EgressProxy.caCertificatePem(home().dir());
    } catch (IOException e) {
      throw new WorkspaceException("cannot read the egress proxy's CA: " + e.getMessage(), e);
    }
    sandboxes.runAsRoot(id, Networks.installCaArgv(pem), "install the egress proxy's CA");
  }
}
