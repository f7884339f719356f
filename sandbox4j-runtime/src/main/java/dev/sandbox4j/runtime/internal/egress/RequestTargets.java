package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.internal.addr.HostNames;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.net.Inet4Address;
import java.net.InetAddress;

/**
 * What a client asks for, parsed strictly: the request line, {@code host:port}, address literals.
 */
final class RequestTargets {
  private RequestTargets() {}

  static String[] requestLine(HttpWire.Head head) throws HttpWire.Malformed {
    String[] parts = head.startLine().split(" ", -1);
    if (parts.length != 3 || !HttpWire.isToken(parts[0]) || parts[1].isEmpty()) {
      throw new HttpWire.Malformed(400, "the request line is not 'METHOD target HTTP/1.1'");
    }
    if (!parts[2].equals("HTTP/1.1") && !parts[2].equals("HTTP/1.0")) {
      throw new HttpWire.Malformed(505, "only HTTP/1.0 and HTTP/1.1 are served");
    }
    for (int i = 0; i < parts[1].length(); i++) {
      char c = parts[1].charAt(i);
      if (c <= 0x20 || c >= 0x7f) {
        throw new HttpWire.Malformed(400, "the request target has a control or non-ASCII byte");
      }
    }
    return parts;
  }

  /**
   * Splits {@code host:port} ({@code [v6]:port}); {@code defaultPort} when the port is absent
   * ({@code -1}: required).
   */
  static String[] splitAuthority(String authority, int defaultPort) throws HttpWire.Malformed {
    if (authority.contains("@")) {
      throw new HttpWire.Malformed(400, "user information in the request target is not accepted");
    }
    String host;
    String port;
    if (authority.startsWith("[")) {
      int end = authority.indexOf(']');
      if (end < 0) {
        throw new HttpWire.Malformed(400, "an IPv6 address in the target lacks its ']'");
      }
      host = authority.substring(1, end);
      String rest = authority.substring(end + 1);
      if (!rest.isEmpty() && !rest.startsWith(":")) {
        throw new HttpWire.Malformed(400, "junk after the IPv6 address in the target");
      }
      port = rest.isEmpty() ? null : rest.substring(1);
      if (literal(host) == null) {
        throw new HttpWire.Malformed(
            400, "'" + HttpWire.printable(host) + "' is not an IPv6 address");
      }
    } else {
      int colon = authority.lastIndexOf(':');
      host = colon < 0 ? authority : authority.substring(0, colon);
      port = colon < 0 ? null : authority.substring(colon + 1);
    }
    if (port == null || port.isEmpty()) {
      if (defaultPort < 0) {
        throw new HttpWire.Malformed(400, "CONNECT needs host:port");
      }
      port = Integer.toString(defaultPort);
    }
    if (!port.matches("[0-9]{1,5}")
        || Integer.parseInt(port) < 1
        || Integer.parseInt(port) > 65535) {
      throw new HttpWire.Malformed(400, "port '" + HttpWire.printable(port) + "' is not 1..65535");
    }
    if (host.isEmpty()) {
      throw new HttpWire.Malformed(400, "the request target has no host");
    }
    return new String[] {host, port};
  }

  /**
   * The address {@code host} spells literally, in any form the system resolver would also take as
   * an address ({@code 127.1}, {@code 0x7f.1}), or null: numeric names must not pass as names.
   */
  static InetAddress literal(String host) {
    try {
      return InetAddress.ofLiteral(host);
    } catch (IllegalArgumentException e) {
      try {
        return Inet4Address.ofPosixLiteral(host);
      } catch (IllegalArgumentException notPosix) {
        return null;
      }
    }
  }

  static boolean sameHost(String hostHeader, String target) {
    String h = hostHeader.strip();
    if (h.startsWith("[")) {
      int end = h.indexOf(']');
      h = end < 0 ? h : h.substring(1, end);
    } else {
      int colon = h.lastIndexOf(':');
      h = colon < 0 ? h : h.substring(0, colon);
    }
    return HostNames.normalizeHost(h).equals(target)
        || (literal(h) != null && literal(h).getHostAddress().equals(target));
  }
}
