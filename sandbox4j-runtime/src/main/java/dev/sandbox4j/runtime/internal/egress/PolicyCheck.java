package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.addr.HostNames;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.logging.Level;

/**
 * The policy's word on each request: which sandbox's policy applies to a client (by its source
 * address), and whether that policy opens a destination, resolved here and checked address by
 * address. Refusals carry a one-line reason an agent can act on.
 */
final class PolicyCheck {
  private final EgressProxy.PolicyLookup lookup;
  private final EgressResolver resolver;
  private final Predicate<InetAddress> isPublic;
  private final Function<InetAddress, Optional<String>> neverOpen;

  PolicyCheck(
      EgressProxy.PolicyLookup lookup,
      EgressResolver resolver,
      Predicate<InetAddress> isPublic,
      Function<InetAddress, Optional<String>> neverOpen) {
    this.lookup = lookup;
    this.resolver = resolver;
    this.isPublic = isPublic;
    this.neverOpen = neverOpen;
  }

  /** An address the policy allows, and what the client asked for. */
  record Target(String host, int port, List<InetAddress> addresses) {}

  /** The policy of the sandbox that {@code source} belongs to. */
  EgressPolicy policyOf(InetAddress source) throws Refusal {
    Optional<EgressPolicy> policy;
    try {
      policy = lookup.policyFor(source);
    } catch (RuntimeException e) {
      EgressProxy.LOG.log(Level.WARNING, "egress policy lookup failed for " + source, e);
      throw new Refusal(
          500, "sandbox4j egress proxy: cannot read the egress policy: " + e.getMessage());
    }
    return policy.orElseThrow(
        () ->
            new Refusal(
                403,
                "sandbox4j egress proxy: "
                    + source.getHostAddress()
                    + " is not a sandbox this proxy serves"));
  }

  /** What the policy says about {@code host:port}: the addresses to try, or a refusal. */
  Target decide(EgressPolicy policy, String rawHost, int port) throws Refusal {
    String host = HostNames.normalizeHost(rawHost);
    InetAddress literal = RequestTargets.literal(host);
    if (literal != null) {
      Optional<String> closed = neverOpen.apply(literal);
      if (closed.isPresent()) {
        throw neverOpened(host, literal, closed.get());
      }
      boolean ok =
          policy.mode() != EgressPolicy.Mode.NONE
              && (policy.cidrAllows(literal)
                  || (policy.mode() == EgressPolicy.Mode.ALL && isPublic.test(literal)));
      if (!ok) {
        throw denied(policy, host, null);
      }
      return new Target(literal.getHostAddress(), port, List.of(literal));
    }
    String lastLabel = host.substring(host.lastIndexOf('.') + 1);
    if (!HostNames.isValidHostName(host) || lastLabel.chars().allMatch(Character::isDigit)) {
      throw new Refusal(
          400, "sandbox4j egress proxy: '" + HttpWire.printable(rawHost) + "' is not a host name");
    }
    if (HostNames.isLocalhostName(host)) {
      // RFC 6761: these names are loopback whatever a resolver says (browsers and curl resolve
      // them so without asking); the port proxy's URLs are such names.
      throw neverOpened(host, InetAddress.getLoopbackAddress(), "a localhost name is loopback");
    }
    if (!policy.allowsName(host)) {
      throw denied(policy, host, null);
    }
    List<InetAddress> resolved;
    try {
      resolved = resolver.resolve(host);
    } catch (UnknownHostException e) {
      throw new Refusal(502, "sandbox4j egress proxy: cannot resolve " + host + ": no such host");
    } catch (RuntimeException e) {
      throw new Refusal(
          502, "sandbox4j egress proxy: cannot resolve " + host + ": " + e.getMessage());
    }
    List<InetAddress> ok = new ArrayList<>();
    InetAddress refused = null;
    Optional<String> closedWhy = Optional.empty();
    InetAddress closedAddress = null;
    for (InetAddress a : resolved) {
      Optional<String> closed = neverOpen.apply(a);
      if (closed.isPresent()) {
        if (closedAddress == null) {
          closedAddress = a;
          closedWhy = closed;
        }
      } else if (policy.cidrAllows(a) || isPublic.test(a)) {
        ok.add(a);
      } else if (refused == null) {
        refused = a;
      }
    }
    if (ok.isEmpty()) {
      if (closedAddress != null) {
        throw neverOpened(host, closedAddress, closedWhy.get());
      }
      if (refused == null) {
        throw new Refusal(502, "sandbox4j egress proxy: cannot resolve " + host + ": no address");
      }
      throw denied(policy, host, refused);
    }
    return new Target(host, port, List.copyOf(ok));
  }

  private Refusal neverOpened(String host, InetAddress address, String why) {
    String resolved =
        RequestTargets.literal(host) != null ? "" : " (" + address.getHostAddress() + ")";
    return new Refusal(
        403, "sandbox4j egress proxy: no egress policy opens " + host + resolved + ": " + why);
  }

  private Refusal denied(EgressPolicy policy, String host, InetAddress nonPublic) {
    String why =
        nonPublic == null
            ? ""
            : ": it resolves to " + nonPublic.getHostAddress() + ", which is not public";
    return new Refusal(
        403,
        "sandbox4j egress policy denies "
            + host
            + why
            + " (allowed: "
            + policy.describeAllowed()
            + ")");
  }
}
