package dev.sandbox4j.docker;

import dev.sandbox4j.runtime.internal.net.Nftables;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.Optional;

/**
 * The host's rules for the docker sandboxes' bridge ({@value DockerNetwork#BRIDGE} on Docker), in
 * an nftables table of their own, {@value #TABLE}: from the bridge the host accepts only the egress
 * proxy's port, the DNS stub's and replies to its own connections, rejects the rest (at once, so a
 * client fails fast), and forwards nothing. Another base chain on the same hook (Docker's iptables,
 * the local engine's tables) cannot accept what this one drops. Free of docker-java: the supervisor
 * installs it too.
 */
final class BridgeFirewall {
  static final String TABLE = "sandbox4j_docker";

  private BridgeFirewall() {}

  /** Makes the table anew in one transaction (idempotent). */
  static void install(String bridge) {
    if (!bridge.matches("[A-Za-z0-9_.-]{1,15}")) {
      throw new IllegalArgumentException("not an interface name: " + bridge);
    }
    Nftables.run(
        """
        table inet %1$s {}
        delete table inet %1$s
        table inet %1$s {
          chain input {
            type filter hook input priority -10; policy accept;
            iifname "%2$s" ct state established,related accept
            iifname "%2$s" tcp dport %3$d ct state new accept
            iifname "%2$s" udp dport %4$d accept
            iifname "%2$s" reject
          }
          chain forward {
            type filter hook forward priority -10; policy accept;
            iifname "%2$s" drop
          }
        }
        """
            .formatted(TABLE, bridge, DockerNetwork.PROXY_PORT, DockerNetwork.DNS_PORT));
  }

  /**
   * The host's interface that has {@code address}: the network's bridge, found by its gateway (a
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
