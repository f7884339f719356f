package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.addr.Cidr;
import dev.sandbox4j.runtime.internal.addr.PublicAddresses;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The nftables scripts of one home ({@link Nftables} runs them): its table with the fixed chains
 * and sets, each sandbox's own chain for its policy and networks, and the script that removes a
 * sandbox's rules. Only text: nothing here touches the host.
 */
final class NftablesRules {
  /**
   * Not public: where sandboxes must not go in mode ALL ({@link PublicAddresses#NON_PUBLIC_V4}).
   */
  static final List<String> PRIVATE_V4 = PublicAddresses.NON_PUBLIC_V4;

  private final HostNames names;
  private final HomeSubnet subnet;

  NftablesRules(HostNames names, HomeSubnet subnet) {
    this.names = names;
    this.subnet = subnet;
  }

  /** The home's table and chains; idempotent (the fixed chains are flushed and filled anew). */
  String baseRules() {
    String t = "inet " + names.table();
    String prefix = "s4" + names.hash() + "-*";
    String sub = "10." + subnet.subnet() + ".0.0/16";
    return ("add table " + t + "\n")
        + ("add set "
            + t
            + " private { type ipv4_addr; flags interval; elements = { "
            + String.join(", ", PRIVATE_V4)
            + " }; }\n")
        + ("add set "
            + t
            + " never_open { type ipv4_addr; flags interval; elements = { "
            + String.join(", ", neverOpen(4))
            + " }; }\n")
        + ("add set "
            + t
            + " never_open6 { type ipv6_addr; flags interval; elements = { "
            + String.join(", ", neverOpen(16))
            + " }; }\n")
        + ("add map " + t + " egress { type ifname : verdict; }\n")
        + ("add set " + t + " proxied { type ifname; }\n")
        + ("add chain "
            + t
            + " forward { type filter hook forward priority filter; policy accept; }\n")
        + ("flush chain " + t + " forward\n")
        + ("add rule " + t + " forward iifname vmap @egress\n")
        + ("add rule "
            + t
            + " forward iifname \""
            + prefix
            + "\" reject with icmpx admin-prohibited\n")
        + ("add chain " + t + " input { type filter hook input priority filter; policy accept; }\n")
        + ("flush chain " + t + " input\n")
        + ("add rule "
            + t
            + " input iifname \""
            + prefix
            + "\" ct state established,related accept\n")
        + ("add rule "
            + t
            + " input iifname @proxied ip daddr "
            + subnet.gateway()
            + " tcp dport "
            + Networks.PROXY_PORT
            + " accept\n")
        + ("add rule "
            + t
            + " input iifname \""
            + prefix
            + "\" meta l4proto tcp reject with tcp reset\n")
        + ("add rule "
            + t
            + " input iifname \""
            + prefix
            + "\" reject with icmpx admin-prohibited\n")
        + ("add chain "
            + t
            + " postrouting { type nat hook postrouting priority srcnat; policy accept; }\n")
        + ("flush chain " + t + " postrouting\n")
        + ("add rule "
            + t
            + " postrouting ip saddr "
            + sub
            + " ip daddr != "
            + sub
            + " masquerade\n");
  }

  /** The sandbox's own chain, written anew, and its place in the forward map. */
  String sandboxRules(String id, int slot, EgressPolicy policy, NetworkFiles.Saved saved) {
    String t = "inet " + names.table();
    String c = "sb_" + id;
    StringBuilder s = new StringBuilder();
    for (String network : saved.networks()) {
      s.append("add set ").append(t).append(' ').append(setName(network));
      s.append(" { type ipv4_addr; }\n");
      s.append("add element ").append(t).append(' ').append(setName(network));
      s.append(" { ").append(subnet.address(slot)).append(" }\n");
    }
    s.append("add chain ").append(t).append(' ').append(c).append('\n');
    s.append("flush chain ").append(t).append(' ').append(c).append('\n');
    String rule = "add rule " + t + " " + c + " ";
    s.append(rule).append("ct state established,related accept\n");
    s.append(rule).append("ip saddr != ").append(subnet.address(slot)).append(" drop\n");
    for (String network : saved.networks()) {
      s.append(rule).append("ip daddr @").append(setName(network)).append(" accept\n");
    }
    if (policy.mode() == EgressPolicy.Mode.ALL) {
      List<String> dns = Nameservers.publicNameservers();
      if (!dns.isEmpty()) {
        s.append(rule).append("ip daddr { ").append(String.join(", ", dns));
        s.append(" } meta l4proto { tcp, udp } th dport 53 accept\n");
      }
    }
    // Before any CIDR of the policy: what no policy opens stays shut whatever the rules say.
    s.append(rule).append("ip daddr @never_open meta l4proto tcp reject with tcp reset\n");
    s.append(rule).append("ip daddr @never_open reject with icmpx admin-prohibited\n");
    s.append(rule).append("ip6 daddr @never_open6 meta l4proto tcp reject with tcp reset\n");
    s.append(rule).append("ip6 daddr @never_open6 reject with icmpx admin-prohibited\n");
    List<String> v4 = new ArrayList<>();
    List<String> v6 = new ArrayList<>();
    for (String cidr : policy.cidrs()) {
      (cidr.contains(":") ? v6 : v4).add(cidr);
    }
    if (!v4.isEmpty()) {
      s.append(rule).append("ip daddr { ").append(String.join(", ", v4)).append(" } accept\n");
    }
    if (!v6.isEmpty()) {
      s.append(rule).append("ip6 daddr { ").append(String.join(", ", v6)).append(" } accept\n");
    }
    if (policy.mode() == EgressPolicy.Mode.ALL) {
      s.append(rule).append("meta nfproto ipv4 ip daddr != @private accept\n");
    }
    s.append(rule).append("meta l4proto tcp reject with tcp reset\n");
    s.append(rule).append("reject with icmpx admin-prohibited\n");
    s.append("add element ").append(t).append(" egress { \"").append(names.vethName(slot));
    s.append("\" : jump ").append(c).append(" }\n");
    // Added first so that the delete cannot fail on a missing element: one transaction.
    s.append("add element ").append(t).append(" proxied { \"").append(names.vethName(slot));
    s.append("\" }\n");
    if (!usesProxy(policy)) {
      s.append("delete element ").append(t).append(" proxied { \"").append(names.vethName(slot));
      s.append("\" }\n");
    }
    return s.toString();
  }

  /** The never-open ranges of one address length (4 or 16 bytes), as nftables elements. */
  static List<String> neverOpen(int bytes) {
    return PublicAddresses.NEVER_OPEN_MINIMAL.stream()
        .map(PublicAddresses.Range::cidr)
        .filter(c -> c.network().length == bytes)
        .map(Cidr::toString)
        .toList();
  }

  static String setName(String network) {
    return "net_" + network.replace('-', '_');
  }

  /**
   * Removes sandbox {@code id}'s chain, its map entries and its address in its networks' sets. One
   * transaction (each commit costs the kernel milliseconds): everything it deletes is added first,
   * a no-op where it exists, so that no delete fails on what is already gone.
   */
  String removalRules(Optional<NetworkFiles.Saved> saved, String id) {
    String t = "inet " + names.table();
    String c = "sb_" + id;
    StringBuilder s = new StringBuilder();
    s.append("add chain ").append(t).append(' ').append(c).append('\n');
    if (saved.isPresent()) {
      int slot = saved.get().slot();
      String veth = "\"" + names.vethName(slot) + "\"";
      s.append("add element ").append(t).append(" egress { ").append(veth);
      s.append(" : jump ").append(c).append(" }\n");
      s.append("delete element ").append(t).append(" egress { ").append(veth).append(" }\n");
      s.append("add element ").append(t).append(" proxied { ").append(veth).append(" }\n");
      s.append("delete element ").append(t).append(" proxied { ").append(veth).append(" }\n");
      for (String network : saved.get().networks()) {
        String set = t + " " + setName(network);
        s.append("add set ").append(set).append(" { type ipv4_addr; }\n");
        s.append("add element ")
            .append(set)
            .append(" { ")
            .append(subnet.address(slot))
            .append(" }\n");
        s.append("delete element ")
            .append(set)
            .append(" { ")
            .append(subnet.address(slot))
            .append(" }\n");
      }
    }
    s.append("delete chain ").append(t).append(' ').append(c).append('\n');
    return s.toString();
  }

  /** Whether the policy needs the egress proxy: domain rules, or headers to inject. */
  static boolean usesProxy(EgressPolicy p) {
    return (p.mode() == EgressPolicy.Mode.ALLOWLIST && !p.domains().isEmpty())
        || !p.headerRules().isEmpty();
  }
}
