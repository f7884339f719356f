package dev.sandbox4j.runtime;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Which addresses count as "the public internet" for egress: everything but the ranges below, and
 * never the host's own addresses. 198.18.0.0/15 (benchmarking) counts as public on purpose: tests
 * build their fake internet there.
 */
final class PublicAddresses {
  private PublicAddresses() {}

  /**
   * The IPv4 ranges that are not public internet; the nftables rules of mode ALL ({@link Networks})
   * reject the same list.
   */
  static final List<String> NON_PUBLIC_V4 =
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

  private static final List<EgressPolicy.Cidr> NON_PUBLIC =
      java.util.stream.Stream.concat(
              NON_PUBLIC_V4.stream(),
              java.util.stream.Stream.of("::/128", "::1/128", "fe80::/10", "fc00::/7", "ff00::/8"))
          .map(EgressPolicy.Cidr::parse)
          .toList();

  /** The host's own addresses, re-read at most every few seconds (interfaces come and go). */
  private static volatile Set<InetAddress> hostAddresses = Set.of();

  private static volatile long hostAddressesRead;

  /** Whether {@code address} is in the public internet: in no reserved range, not the host's. */
  static boolean isPublic(InetAddress address) {
    InetAddress a = unmapped(address);
    return !inReservedRange(a) && !hostAddresses().contains(a);
  }

  /** Whether {@code address} is in one of the ranges that are never public. */
  static boolean inReservedRange(InetAddress address) {
    InetAddress a = unmapped(address);
    for (EgressPolicy.Cidr cidr : NON_PUBLIC) {
      if (cidr.contains(a)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The IPv4 address an IPv4-mapped or -compatible IPv6 address carries (so {@code ::ffff:10.0.0.1}
   * is judged as 10.0.0.1), else the address itself.
   */
  static InetAddress unmapped(InetAddress address) {
    if (address instanceof Inet6Address) {
      byte[] b = address.getAddress();
      boolean zeros = true;
      for (int i = 0; i < 10; i++) {
        zeros &= b[i] == 0;
      }
      boolean mapped = zeros && (b[10] & 0xff) == 0xff && (b[11] & 0xff) == 0xff;
      boolean nat64 =
          b[0] == 0 && (b[1] & 0xff) == 0x64 && (b[2] & 0xff) == 0xff && (b[3] & 0xff) == 0x9b;
      if (mapped || nat64) {
        try {
          return Inet4Address.getByAddress(new byte[] {b[12], b[13], b[14], b[15]});
        } catch (java.net.UnknownHostException e) {
          throw new IllegalStateException(e);
        }
      }
    }
    return address;
  }

  private static Set<InetAddress> hostAddresses() {
    long now = System.nanoTime();
    if (now - hostAddressesRead > 5_000_000_000L || hostAddressesRead == 0) {
      Set<InetAddress> found = new HashSet<>();
      try {
        for (NetworkInterface nic : NetworkInterface.networkInterfaces().toList()) {
          nic.inetAddresses().map(PublicAddresses::unmapped).forEach(found::add);
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
}
