package dev.sandbox4j.docker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.net.Nftables;
import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The host's rules for the bridges of the docker sandboxes' networks, in an nftables table of their
 * own, {@value #TABLE}, made anew from the daemon's networks labelled {@value DockerNetwork#LABEL}
 * (one transaction) whenever one is made, and when a supervisor starts:
 *
 * <ul>
 *   <li>the egress network's bridge ({@value DockerNetwork#BRIDGE} on Docker): the host accepts
 *       only the egress proxy's port, the DNS stub's and replies to its own connections, rejects
 *       the rest (at once, so a client fails fast), and forwards nothing;
 *   <li>a named network's bridge: the host accepts only replies and rejects the rest; frames
 *       between two members (the same bridge in and out) pass, nothing else is forwarded.
 * </ul>
 *
 * <p>Another base chain on the same hook (Docker's iptables, the local engine's tables) cannot
 * accept what this one drops. Free of docker-java: the supervisor refreshes it too.
 */
final class BridgeFirewall {
  static final String TABLE = "sandbox4j_docker";
  private static final Pattern INTERFACE = Pattern.compile("[A-Za-z0-9_.-]{1,15}");
  private static final ObjectMapper JSON = new ObjectMapper();

  private BridgeFirewall() {}

  /** Our networks' bridges on this host, by kind. */
  record Bridges(List<String> egress, List<String> named) {}

  /**
   * Reads the daemon's networks of ours and installs the rules for their bridges on this host.
   *
   * @throws IOException if the daemon cannot be asked
   */
  static Bridges refresh(URI host) throws IOException {
    String filter = "{\"label\":[\"" + DockerNetwork.LABEL + "\"]}";
    DaemonSocket.Reply r =
        DaemonSocket.call(
            host, "GET", "/networks?filters=" + URLEncoder.encode(filter, StandardCharsets.UTF_8));
    if (r.status() != 200) {
      throw new IOException("the daemon did not list its networks: " + r.status() + " " + r.body());
    }
    List<String> egress = new ArrayList<>();
    List<String> named = new ArrayList<>();
    for (JsonNode network : JSON.readTree(r.body())) {
      String gateway = network.path("IPAM").path("Config").path(0).path("Gateway").asText("");
      if (gateway.isEmpty()) {
        continue;
      }
      Optional<String> bridge = interfaceWith(InetAddress.ofLiteral(gateway));
      if (bridge.isEmpty()) {
        continue; // not on this host
      }
      String kind = network.path("Labels").path(DockerNetwork.LABEL).asText("");
      (kind.equals(DockerNetwork.EGRESS_KIND) ? egress : named).add(bridge.get());
    }
    Bridges bridges = new Bridges(List.copyOf(egress), List.copyOf(named));
    install(bridges);
    return bridges;
  }

  /** Makes the table anew in one transaction (idempotent). */
  static void install(Bridges bridges) {
    StringBuilder input = new StringBuilder();
    StringBuilder forward = new StringBuilder();
    for (String b : bridges.egress()) {
      String q = quoted(b);
      input.append("    iifname ").append(q).append(" ct state established,related accept\n");
      input
          .append("    iifname ")
          .append(q)
          .append(" tcp dport ")
          .append(DockerNetwork.PROXY_PORT)
          .append(" ct state new accept\n");
      input
          .append("    iifname ")
          .append(q)
          .append(" udp dport ")
          .append(DockerNetwork.DNS_PORT)
          .append(" accept\n");
      input.append("    iifname ").append(q).append(" reject\n");
      forward.append("    iifname ").append(q).append(" drop\n");
    }
    for (String b : bridges.named()) {
      String q = quoted(b);
      input.append("    iifname ").append(q).append(" ct state established,related accept\n");
      input.append("    iifname ").append(q).append(" reject\n");
      forward.append("    iifname ").append(q).append(" oifname ").append(q).append(" accept\n");
      forward.append("    iifname ").append(q).append(" drop\n");
    }
    Nftables.run(
        """
        table inet %1$s {}
        delete table inet %1$s
        table inet %1$s {
          chain input {
            type filter hook input priority -10; policy accept;
        %2$s  }
          chain forward {
            type filter hook forward priority -10; policy accept;
        %3$s  }
        }
        """
            .formatted(TABLE, input, forward));
  }

  private static String quoted(String bridge) {
    if (!INTERFACE.matcher(bridge).matches()) {
      throw new IllegalArgumentException("not an interface name: " + bridge);
    }
    return "\"" + bridge + "\"";
  }

  /**
   * The host's interface that has {@code address}: a network's bridge, found by its gateway (a
   * daemon may name it otherwise than asked: Podman), empty if the daemon's networks are not here.
   */
  static Optional<String> interfaceWith(InetAddress address) {
    try {
      return Optional.ofNullable(NetworkInterface.getByInetAddress(address))
          .map(NetworkInterface::getName);
    } catch (SocketException e) {
      return Optional.empty();
    }
  }
}
