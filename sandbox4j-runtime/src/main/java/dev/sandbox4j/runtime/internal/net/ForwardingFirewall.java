package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import java.util.ArrayList;
import java.util.List;

/**
 * Keeps another firewall's {@code FORWARD} policy from dropping sandboxes' forwarded packets: two
 * {@code ACCEPT} rules, for packets that enter and that leave through a sandbox's host-side veth
 * ({@code s4…}, see {@link HostNames}), at the top of iptables' {@code filter FORWARD} chain.
 *
 * <p>Why: Docker, when it is the one that switches IPv4 forwarding on (as at boot), sets that
 * chain's policy to DROP. A drop in any netfilter base chain is final, so the engine's own table
 * cannot accept those packets: default egress and named networks then time out. Docker never
 * flushes the chain (it inserts its own jumps above), so rules added before or after it starts both
 * survive it. They weaken nothing: the engine's {@code inet s4j_*} tables still drop what a
 * sandbox's egress policy forbids, whatever another table accepts.
 *
 * <p>Non-goals: hosts without the {@code iptables} tool (no Docker runs there; a firewall that
 * drops forwarded packets by other means is reported by nobody), and IPv6 (sandboxes have none).
 */
public final class ForwardingFirewall {
  private static final List<List<String>> RULES =
      List.of(
          List.of("FORWARD", "-i", "s4+", "-j", "ACCEPT"),
          List.of("FORWARD", "-o", "s4+", "-j", "ACCEPT"));

  private ForwardingFirewall() {}

  /**
   * Adds the rules that are missing; nothing without iptables.
   *
   * @return what it added, for {@code setup}'s log; empty when nothing was missing
   * @throws dev.sandbox4j.workspace.WorkspaceException if iptables refuses a rule
   */
  public static List<String> ensureAccepted() {
    List<String> added = new ArrayList<>();
    if (!HostCommand.onPath("iptables")) {
      return added;
    }
    for (List<String> rule : RULES) {
      if (!iptables("-C", rule).ok()) {
        HostCommand.Result r = iptables("-I", rule);
        if (!r.ok()) {
          throw new dev.sandbox4j.workspace.WorkspaceException(
              "cannot add iptables -I " + String.join(" ", rule) + ": " + r.output());
        }
        added.add("iptables -I " + String.join(" ", rule));
      }
    }
    return added;
  }

  /** Removes the rules (for a test that shows what they are for). */
  public static void remove() {
    for (List<String> rule : RULES) {
      while (iptables("-C", rule).ok()) {
        iptables("-D", rule);
      }
    }
  }

  /** Whether iptables' {@code FORWARD} chain drops what no rule accepts (its policy). */
  public static boolean forwardPolicyDrops() {
    if (!HostCommand.onPath("iptables")) {
      return false;
    }
    HostCommand.Result r = HostCommand.run(List.of("iptables", "-w", "-S", "FORWARD"));
    return r.ok() && r.stdout().lines().anyMatch(l -> l.equals("-P FORWARD DROP"));
  }

  /** {@code doctor}'s check: a DROP policy without the rules breaks sandboxes' networking. */
  public static HostCheck check() {
    if (!forwardPolicyDrops()) {
      return HostCheck.ok(
          "forwarding",
          "no iptables FORWARD policy drops sandboxes' packets (the engine adds two ACCEPT rules"
              + " for its s4* interfaces when iptables is installed)");
    }
    List<String> missing =
        RULES.stream()
            .filter(rule -> !iptables("-C", rule).ok())
            .map(ForwardingFirewall::text)
            .toList();
    if (missing.isEmpty()) {
      return HostCheck.ok(
          "forwarding",
          "iptables FORWARD policy is DROP (Docker sets it), and the engine's ACCEPT rules for"
              + " its s4* interfaces are in place");
    }
    return HostCheck.missing(
        "forwarding",
        "iptables FORWARD policy is DROP (Docker sets it when it switches forwarding on) and the"
            + " engine's ACCEPT rules for its s4* interfaces are missing: default egress and named"
            + " networks time out",
        String.join(" && ", missing));
  }

  private static String text(List<String> rule) {
    return "iptables -I " + String.join(" ", rule);
  }

  private static HostCommand.Result iptables(String op, List<String> rule) {
    List<String> argv = new ArrayList<>(List.of("iptables", "-w", op));
    argv.addAll(rule);
    return HostCommand.run(argv);
  }
}
