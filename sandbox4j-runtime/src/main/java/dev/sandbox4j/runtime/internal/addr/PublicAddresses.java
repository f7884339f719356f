package dev.sandbox4j.runtime.internal.addr;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.net.Networks;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The one list of address ranges the engine shares: which addresses count as "the public internet"
 * (mode ALL), and which no egress policy can ever open, whatever its rules say.
 *
 * <p><b>Never open</b> ({@link #NEVER_OPEN}): the host (any of its own addresses), {@code
 * 0.0.0.0/8} (connecting to 0.0.0.0 reaches the host's own services), loopback, link-local (cloud
 * metadata services live there) and the engine's own {@value #ENGINE_RANGE}, where every home's
 * sandboxes, their gateway and the egress proxy live. The port proxy listens on loopback and the
 * egress proxy on a gateway in {@value #ENGINE_RANGE}, so the proxies' ports are in this list too.
 * {@link EgressPolicy#allow} refuses a CIDR rule inside one of these ranges and narrows one that
 * overlaps them; the egress proxy's decision and each sandbox's nftables chain refuse them again,
 * so a policy that somehow holds such a rule (an old record on disk) still opens none of them.
 * Members of a named network reach each other by the network's own rule, which comes first.
 *
 * <p><b>IPv6 forms of IPv4 addresses.</b> An IPv6 address that embeds an IPv4 address is judged by
 * that address as well as by itself: IPv4-compatible ({@code ::a.b.c.d}), IPv4-mapped ({@code
 * ::ffff:a.b.c.d}), IPv4-translated ({@code ::ffff:0:a.b.c.d}), NAT64 ({@code 64:ff9b::/96} and the
 * local-use {@code 64:ff9b:1::/48}, RFC 6052 layout), 6to4 ({@code 2002::/16}) and Teredo ({@code
 * 2001::/32}: its server and its obfuscated client address). So {@code 64:ff9b::7f00:1} is loopback
 * and {@code 2002:a00:1::} is private.
 *
 * <p>198.18.0.0/15 (benchmarking) counts as public on purpose: tests build their fake internet
 * there.
 */
public final class PublicAddresses {
  private PublicAddresses() {}

  /** The sandboxes' own range: every home claims a /16 in it ({@link Networks}). */
  static final String ENGINE_RANGE = "10.64.0.0/10";

  /**
   * The IPv4 ranges that are not public internet; the nftables rules of mode ALL ({@link Networks})
   * reject the same list.
   */
  public static final List<String> NON_PUBLIC_V4 =
      List.of(
          "0.0.0.0/8",
          "10.0.0.0/8",
          "100.64.0.0/10",
          "127.0.0.0/8",
          "169.254.0.0/16",
          "172.16.0.0/12",
          "192.168.0.0/16",
          "224.0.0.0/4",
          "240.0.0.0/4");

  /**
   * IPv6 ranges that are not public internet in themselves (their embedded IPv4 addresses are
   * judged on top): unspecified, loopback, IPv4-compatible (deprecated) and -translated,
   * discard-only, documentation, the local-use NAT64 prefix, site-local, unique local, link-local,
   * multicast.
   */
  static final List<String> NON_PUBLIC_V6 =
      List.of(
          "::/96",
          "::ffff:0:0:0/96",
          "100::/64",
          "2001:db8::/32",
          "64:ff9b:1::/48",
          "fec0::/10",
          "fc00::/7",
          "fe80::/10",
          "ff00::/8");

  /** A range and what it is, for error and denial messages. */
  public record Range(Cidr cidr, String what) {
    @Override
    public String toString() {
      return cidr + " (" + what + ")";
    }
  }

  /** The IPv4 ranges no egress policy opens. */
  static final List<Range> NEVER_OPEN_V4 =
      List.of(
          range("0.0.0.0/8", "'this network': 0.0.0.0 reaches the host itself"),
          range("127.0.0.0/8", "loopback: the host's own services"),
          range("169.254.0.0/16", "link-local: cloud metadata services"),
          range(
              ENGINE_RANGE,
              "the engine's own range: other sandboxes, their gateway and the egress proxy"));

  /**
   * Every range no egress policy opens: {@link #NEVER_OPEN_V4}, IPv6 loopback, unspecified and
   * link-local, and each IPv6 form that embeds an address of {@link #NEVER_OPEN_V4} at a fixed
   * place (Teredo's obfuscated form is judged per address instead). The plainest name of an address
   * comes first, for messages.
   */
  static final List<Range> NEVER_OPEN;

  /** {@link #NEVER_OPEN} without the ranges inside another: one nftables interval set takes it. */
  public static final List<Range> NEVER_OPEN_MINIMAL;

  static {
    List<Range> all = new ArrayList<>(NEVER_OPEN_V4);
    all.add(range("::/128", "the unspecified address: the host itself"));
    all.add(range("::1/128", "loopback: the host's own services"));
    all.add(range("fe80::/10", "link-local"));
    for (Range v4 : NEVER_OPEN_V4) {
      for (Embedding e : Embedding.values()) {
        all.add(new Range(e.image(v4.cidr()), v4.what() + ", in its " + e.label + " form"));
      }
    }
    List<Range> minimal = new ArrayList<>();
    for (Range r : all) {
      boolean inside = false;
      for (Range other : all) {
        inside |= other != r && other.cidr().contains(r.cidr()) && !other.cidr().equals(r.cidr());
      }
      if (!inside) {
        minimal.add(r);
      }
    }
    NEVER_OPEN = List.copyOf(all);
    NEVER_OPEN_MINIMAL = List.copyOf(minimal);
  }

  private static final List<Cidr> NON_PUBLIC =
      Stream.concat(NON_PUBLIC_V4.stream(), NON_PUBLIC_V6.stream()).map(Cidr::parse).toList();

  /** The host's own addresses, re-read at most every few seconds (interfaces come and go). */
  private static volatile Set<InetAddress> hostAddresses = Set.of();

  private static volatile long hostAddressesRead;

  /**
   * Whether {@code address} is in the public internet: in no non-public range, itself or the IPv4
   * address it embeds, and not one of the host's addresses.
   */
  public static boolean isPublic(InetAddress address) {
    return !inReservedRange(address) && !isHostAddress(address);
  }

  /** Whether {@code address}, or an IPv4 address it embeds, is in a range that is never public. */
  public static boolean inReservedRange(InetAddress address) {
    for (InetAddress a : forms(address)) {
      for (Cidr cidr : NON_PUBLIC) {
        if (cidr.contains(a)) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * Why no egress policy may open {@code address} ({@link #NEVER_OPEN} or the host's own addresses,
   * also through an embedded IPv4 address), or empty if a policy may.
   */
  public static Optional<String> neverOpen(InetAddress address) {
    for (InetAddress a : forms(address)) {
      for (Range r : NEVER_OPEN) {
        if (r.cidr().contains(a)) {
          return Optional.of("it is in " + r);
        }
      }
    }
    if (isHostAddress(address)) {
      return Optional.of("it is one of the host's own addresses");
    }
    return Optional.empty();
  }

  /** The range of {@link #NEVER_OPEN} that holds all of {@code rule}, if one does. */
  public static Optional<Range> neverOpenHolding(Cidr rule) {
    return NEVER_OPEN.stream().filter(r -> r.cidr().contains(rule)).findFirst();
  }

  /**
   * The never-open ranges {@code rule} overlaps, for saying how it is narrowed: IPv4 ranges once
   * each, their IPv6 forms folded into one line.
   */
  public static List<String> neverOpenWithin(Cidr rule) {
    Map<String, Boolean> out = new LinkedHashMap<>();
    for (Range r : NEVER_OPEN) {
      if (rule.overlaps(r.cidr())) {
        int form = r.what().indexOf(", in its ");
        out.put(form < 0 ? r.toString() : "the IPv6 forms of the IPv4 ranges above", true);
      }
    }
    return List.copyOf(out.keySet());
  }

  /**
   * {@code address} and every IPv4 address it embeds (see the class comment); an IPv4 address is
   * its own only form.
   */
  static List<InetAddress> forms(InetAddress address) {
    if (!(address instanceof Inet6Address)) {
      return List.of(address);
    }
    byte[] b = address.getAddress();
    List<InetAddress> out = new ArrayList<>(3);
    out.add(address);
    for (Embedding e : Embedding.values()) {
      if (e.holds(b)) {
        out.add(v4(e.extract(b)));
      }
    }
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
      // Teredo: the server's address as is, the client's with every bit flipped.
      out.add(v4(new byte[] {b[4], b[5], b[6], b[7]}));
      out.add(v4(new byte[] {(byte) ~b[12], (byte) ~b[13], (byte) ~b[14], (byte) ~b[15]}));
    }
    return out;
  }

  /**
   * The IPv4 address an IPv4-mapped or -compatible IPv6 address (or a NAT64 one) carries, so that
   * {@code ::ffff:10.0.0.1} is judged as 10.0.0.1; else the address itself. For test servers named
   * by CIDR; decisions use {@link #forms}.
   */
  public static InetAddress unmapped(InetAddress address) {
    List<InetAddress> forms = forms(address);
    return forms.size() > 1 ? forms.get(1) : address;
  }

  /** Where an IPv6 address may carry an IPv4 address at a fixed place. */
  private enum Embedding {
    COMPATIBLE("IPv4-compatible", new byte[12], 96, new int[] {12, 13, 14, 15}),
    MAPPED(
        "IPv4-mapped",
        new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff},
        96,
        new int[] {12, 13, 14, 15}),
    TRANSLATED(
        "IPv4-translated",
        new byte[] {0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff, 0, 0},
        96,
        new int[] {12, 13, 14, 15}),
    NAT64(
        "NAT64", new byte[] {0, 0x64, (byte) 0xff, (byte) 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96, null),
    NAT64_LOCAL("local-use NAT64", new byte[] {0, 0x64, (byte) 0xff, (byte) 0x9b, 0, 1}, 48, null),
    SIX_TO_FOUR("6to4", new byte[] {0x20, 0x02}, 16, new int[] {2, 3, 4, 5});

    final String label;
    final byte[] prefix;
    final int prefixBits;
    final int[] at;

    Embedding(String label, byte[] prefix, int prefixBits, int[] at) {
      this.label = label;
      this.prefix = prefix;
      this.prefixBits = prefixBits;
      // RFC 6052: a /96 prefix carries the address in the last four bytes; a /48 one in bytes 6-7
      // and 9-10 (byte 8 is the "u" octet, zero).
      this.at =
          at != null ? at : prefixBits == 96 ? new int[] {12, 13, 14, 15} : new int[] {6, 7, 9, 10};
    }

    boolean holds(byte[] b) {
      for (int i = 0; i < prefix.length; i++) {
        if (b[i] != prefix[i]) {
          return false;
        }
      }
      return this != NAT64_LOCAL || b[8] == 0;
    }

    byte[] extract(byte[] b) {
      return new byte[] {b[at[0]], b[at[1]], b[at[2]], b[at[3]]};
    }

    /** The IPv6 range of this form that holds exactly the addresses of {@code v4}. */
    Cidr image(Cidr v4) {
      byte[] out = new byte[16];
      System.arraycopy(prefix, 0, out, 0, prefix.length);
      byte[] n = v4.network();
      for (int i = 0; i < 4; i++) {
        out[at[i]] = n[i];
      }
      // The prefix bits, then the IPv4 prefix's bits where they sit (a gap for NAT64_LOCAL's "u"
      // octet, which is zero: counted as fixed).
      int bits = at[0] * 8 + v4.prefix();
      if (this == NAT64_LOCAL && v4.prefix() > 16) {
        bits += 8;
      }
      return Cidr.of(out, bits);
    }
  }

  private static Range range(String cidr, String what) {
    return new Range(Cidr.parse(cidr), what);
  }

  private static InetAddress v4(byte[] b) {
    try {
      return Inet4Address.getByAddress(b);
    } catch (UnknownHostException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Whether {@code address}, or an IPv4 address it embeds, is one of the host's own. */
  static boolean isHostAddress(InetAddress address) {
    Set<InetAddress> own = hostAddresses();
    for (InetAddress a : forms(address)) {
      if (own.contains(a)) {
        return true;
      }
    }
    return false;
  }

  private static Set<InetAddress> hostAddresses() {
    long now = System.nanoTime();
    if (now - hostAddressesRead > 5_000_000_000L || hostAddressesRead == 0) {
      Set<InetAddress> found = new HashSet<>();
      try {
        for (NetworkInterface nic : NetworkInterface.networkInterfaces().toList()) {
          // Without the scope: fe80::1%eth0 and fe80::1 are one address to a connect.
          nic.inetAddresses().map(PublicAddresses::unscoped).forEach(found::add);
        }
      } catch (SocketException e) {
        // Keep the previous set: failing open to "no host addresses" would expose the host.
        return hostAddresses;
      }
      hostAddresses = Set.copyOf(found);
      hostAddressesRead = now;
    }
    return hostAddresses;
  }

  private static InetAddress unscoped(InetAddress a) {
    if (a instanceof Inet6Address && ((Inet6Address) a).getScopeId() != 0) {
      try {
        return InetAddress.getByAddress(a.getAddress());
      } catch (UnknownHostException e) {
        throw new IllegalStateException(e);
      }
    }
    return a;
  }
}
