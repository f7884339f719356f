package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * A running sandbox's way out on the host: the name of its network namespace ({@code ip netns
 * attach}), its routed veth pair with its address and routes (in process with {@link Rtnetlink},
 * else with {@code ip}), and IPv4 forwarding. Adds, detaches before a checkpoint, and removes them;
 * the rules are {@link NftablesRules}'.
 */
final class VethLinks {
  // The logger it had before this class was split out of Networks: log settings keep working.
  private static final System.Logger LOG = System.getLogger(Networks.class.getName());

  private final HostNames names;
  private final HomeSubnet subnet;
  private volatile boolean forwarding;
  private volatile boolean netnsDirShared;

  VethLinks(HostNames names, HomeSubnet subnet) {
    this.names = names;
    this.subnet = subnet;
  }

  /**
   * Gives running sandbox {@code id} (its init is {@code pid}) its way out, unless it has it: names
   * its network namespace ({@code ip netns attach}: the namespace is the one the runtime made,
   * owned by the sandbox's user namespace, as checkpoint/restore needs), and adds the veth pair,
   * the address and the routes. Idempotent; after a restart or a restore (a new namespace) the
   * stale name and veth are replaced.
   */
  void attach(String id, int slot, long pid) {
    Path ns = names.netnsPath(id);
    String veth = names.vethName(slot);
    Path own = Path.of("/proc", Long.toString(pid), "ns", "net");
    boolean named = sameFile(ns, own);
    boolean linked = Files.exists(Path.of("/sys/class/net", veth));
    if (named && linked) {
      return;
    }
    enableForwarding();
    if (!named && !linked && !Files.exists(ns) && subnet.hasGateway() && netnsDirShared()) {
      try {
        Rtnetlink.attach(pid, names.netnsName(id), veth, subnet.address(slot), subnet.gateway());
        return;
      } catch (Rtnetlink.Failure e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "in-process network setup of local:" + id + " failed (" + e.getMessage() + "); ip");
        named = sameFile(ns, own);
        linked = Files.exists(Path.of("/sys/class/net", veth));
      }
    }
    StringBuilder host = new StringBuilder();
    if (!subnet.hasGateway()) {
      host.append("addr replace ").append(subnet.gateway()).append("/32 dev lo\n");
    }
    if (linked) {
      host.append("link delete ").append(veth).append('\n'); // its peer is in a stale namespace
    }
    if (!named) {
      if (Files.exists(ns)) {
        host.append("netns delete ").append(names.netnsName(id)).append('\n');
      }
      host.append("netns attach ").append(names.netnsName(id)).append(' ').append(pid).append('\n');
    }
    host.append("link add ").append(veth).append(" type veth peer name eth0 netns ");
    host.append(names.netnsName(id)).append('\n');
    host.append("link set ").append(veth).append(" up\n");
    host.append("route replace ").append(subnet.address(slot)).append("/32 dev ").append(veth);
    host.append('\n');
    // One spawn for both batches (a spawn from the JVM costs more than the ip runs themselves):
    // the host's side, then inside the namespace it just named.
    String inside =
        "link set lo up\n"
            + ("addr add " + subnet.address(slot) + "/32 dev eth0\n")
            + "link set eth0 up\n"
            + ("route add " + subnet.gateway() + "/32 dev eth0\n")
            + ("route add default via " + subnet.gateway() + " dev eth0\n");
    HostCommand.checkWithInput(
        List.of(
            "sh",
            "-c",
            "ip -batch - <<'EOF1'\n"
                + host
                + "EOF1\nip -n \"$1\" -batch - <<'EOF2'\n"
                + inside
                + "EOF2\n",
            "sh",
            names.netnsName(id)),
        "");
  }

  /**
   * Removes sandbox {@code id}'s veth pair, keeping its rules and slot: before checkpointing it
   * (CRIU cannot dump a veth whose peer is outside the dumped namespaces); {@link #attach} adds it
   * again.
   */
  void detach(String id, int slot) {
    if (Files.exists(Path.of("/sys/class/net", names.vethName(slot)))) {
      HostCommand.Result r = HostCommand.run(List.of("ip", "link", "delete", names.vethName(slot)));
      if (!r.ok() && Files.exists(Path.of("/sys/class/net", names.vethName(slot)))) {
        throw new WorkspaceException(
            "cannot detach the network of local:" + id + " for its checkpoint: " + r.output());
      }
    }
  }

  /**
   * Whether {@code /run/netns} is a mount point of its own (as {@code ip netns} makes it, shared,
   * so that a namespace's name unmounted here is unmounted in every mount namespace that copied
   * it): only then does {@link Rtnetlink} name namespaces itself; else {@code ip} prepares it
   * first.
   */
  private boolean netnsDirShared() {
    if (netnsDirShared) {
      return true;
    }
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
        String[] f = line.split(" ");
        if (f.length > 6
            && f[4].equals(HostNames.NETNS_DIR.toString())
            && line.contains(" shared:")) {
          netnsDirShared = true;
          return true;
        }
      }
    } catch (IOException e) {
      return false;
    }
    return false;
  }

  private static boolean sameFile(Path a, Path b) {
    try {
      return Files.exists(a) && Files.isSameFile(a, b);
    } catch (IOException e) {
      return false;
    }
  }

  private void enableForwarding() {
    if (forwarding) {
      return;
    }
    Path forward = Path.of("/proc/sys/net/ipv4/ip_forward");
    try {
      if (!Files.readString(forward).strip().equals("1")) {
        Files.writeString(forward, "1");
      }
      forwarding = true;
      try {
        ForwardingFirewall.ensureAccepted(); // Docker's DROP policy, see there
      } catch (WorkspaceException e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "sandboxes' forwarded packets may be dropped by another firewall: " + e.getMessage());
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot enable IPv4 forwarding (" + forward + "): " + e, e);
    }
  }

  void removeNetns(String id) {
    Path ns = names.netnsPath(id);
    if (Files.exists(ns)) {
      HostCommand.Result r = HostCommand.run(List.of("ip", "netns", "delete", names.netnsName(id)));
      if (!r.ok() && Files.exists(ns)) {
        throw new WorkspaceException(
            "cannot remove the network namespace of local:" + id + ": " + r.output());
      }
    }
  }
}
