package dev.sandbox4j.workspace.machine;

import java.util.List;
import java.util.Objects;

/**
 * Where a machine may connect to, and which headers the provider's egress proxy adds on its behalf:
 * the value {@link SupportsEgress} reads and writes, the same for every provider.
 *
 * <p>This record checks only its shape (what is required, what goes with which mode). What a rule
 * means, and which rules are refused (malformed domains or CIDRs, ranges no policy opens, framing
 * headers), is the provider's: {@link SupportsEgress#setEgressRules} says so with an {@link
 * IllegalArgumentException}. The local engine's {@code EgressPolicy} is the full form, with
 * validation and matching, and converts from and to this record.
 *
 * @param mode how much of the network the rules open
 * @param allow for {@link Mode#ALLOWLIST}: the domains ({@code api.example.com}, {@code
 *     *.example.com}) and CIDRs ({@code 198.51.100.0/24}) that may be reached; empty otherwise
 * @param headers the headers the egress proxy sets on matching requests, in order
 * @param interceptTls whether the egress proxy terminates TLS (with a CA the machine trusts) so
 *     that header rules reach HTTPS requests
 */
public record EgressRules(
    Mode mode, List<String> allow, List<Header> headers, boolean interceptTls) {

  /** How much of the network the rules open. */
  public enum Mode {
    /** Nothing leaves the machine. */
    NONE,
    /** The public internet, nothing private. */
    ALL,
    /** Only the listed domains and CIDRs. */
    ALLOWLIST
  }

  /**
   * A header the egress proxy sets on requests to hosts matching {@code domain} (exact or {@code
   * *.} wildcard) on {@code ports}: empty means HTTPS requests to port 443 under TLS interception
   * only. {@link #toString} hides the value, a secret that stays outside the machine.
   *
   * @param domain the domain rule
   * @param name the header's name
   * @param value the header's value
   * @param ports the ports whose requests get it, or empty
   */
  public record Header(String domain, String name, String value, List<Integer> ports) {
    /** Checks that domain, name and value are given; copies the ports (null becomes empty). */
    public Header {
      Objects.requireNonNull(domain, "domain");
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(value, "value");
      ports = ports == null ? List.of() : List.copyOf(ports);
    }

    @Override
    public String toString() {
      return "Header[" + domain + (ports.isEmpty() ? "" : "/" + ports) + " " + name + ": ***]";
    }
  }

  /**
   * Checks the mode; copies the lists (null becomes empty).
   *
   * @throws IllegalArgumentException if {@code allow} is not empty but the mode is not {@link
   *     Mode#ALLOWLIST}
   */
  public EgressRules {
    Objects.requireNonNull(mode, "mode");
    allow = allow == null ? List.of() : List.copyOf(allow);
    headers = headers == null ? List.of() : List.copyOf(headers);
    if (mode != Mode.ALLOWLIST && !allow.isEmpty()) {
      throw new IllegalArgumentException(
          "egress mode " + mode + " takes no allow rules, was given " + allow.size());
    }
  }

  /** Nothing leaves the machine. */
  public static EgressRules none() {
    return new EgressRules(Mode.NONE, List.of(), List.of(), false);
  }

  /** The public internet, nothing private. */
  public static EgressRules all() {
    return new EgressRules(Mode.ALL, List.of(), List.of(), false);
  }

  /** Only these domains and CIDRs. */
  public static EgressRules allow(List<String> rules) {
    return new EgressRules(Mode.ALLOWLIST, rules, List.of(), false);
  }
}
