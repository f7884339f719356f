package dev.sandbox4j.runtime.internal.addr;

import java.net.InetAddress;

/** An IPv4 or IPv6 network (a CIDR egress rule, or a reserved range). */
public record Cidr(byte[] network, int prefix) {
  public static Cidr parse(String text) {
    int slash = text.indexOf('/');
    String addr = slash < 0 ? text : text.substring(0, slash);
    InetAddress ip;
    try {
      ip = InetAddress.ofLiteral(addr);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "egress rule '" + text + "' is not a CIDR (198.51.100.0/24) or IP address");
    }
    byte[] bytes = ip.getAddress();
    int max = bytes.length * 8;
    int prefix = max;
    if (slash >= 0) {
      String p = text.substring(slash + 1);
      if (!p.matches("[0-9]{1,3}") || Integer.parseInt(p) > max) {
        throw new IllegalArgumentException(
            "egress rule '" + text + "' has a prefix length outside 0.." + max);
      }
      prefix = Integer.parseInt(p);
    }
    byte[] masked = mask(bytes, prefix);
    if (!java.util.Arrays.equals(masked, bytes)) {
      String fixed = toText(masked) + "/" + prefix;
      throw new IllegalArgumentException(
          "egress rule '" + text + "' has host bits set; did you mean " + fixed + "?");
    }
    return new Cidr(masked, prefix);
  }

  /** {@code network} masked to {@code prefix} bits. */
  public static Cidr of(byte[] network, int prefix) {
    return new Cidr(mask(network, prefix), prefix);
  }

  public boolean contains(InetAddress address) {
    byte[] a = address.getAddress();
    return a.length == network.length && java.util.Arrays.equals(mask(a, prefix), network);
  }

  /** Whether every address of {@code other} is in this network. */
  public boolean contains(Cidr other) {
    return other.network.length == network.length
        && other.prefix >= prefix
        && java.util.Arrays.equals(mask(other.network, prefix), network);
  }

  /** Whether this network and {@code other} share an address. */
  public boolean overlaps(Cidr other) {
    return contains(other) || other.contains(this);
  }

  private static byte[] mask(byte[] bytes, int prefix) {
    byte[] out = bytes.clone();
    for (int i = 0; i < out.length; i++) {
      int bits = Math.max(0, Math.min(8, prefix - i * 8));
      out[i] = (byte) (out[i] & (0xff << (8 - bits)));
    }
    return out;
  }

  private static String toText(byte[] bytes) {
    try {
      // Inet6Address's own factory: InetAddress's turns an IPv4-mapped address into IPv4.
      return bytes.length == 16
          ? java.net.Inet6Address.getByAddress(null, bytes, -1).getHostAddress()
          : InetAddress.getByAddress(bytes).getHostAddress();
    } catch (java.net.UnknownHostException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Cidr c && prefix == c.prefix && java.util.Arrays.equals(network, c.network);
  }

  @Override
  public int hashCode() {
    return java.util.Arrays.hashCode(network) * 31 + prefix;
  }

  @Override
  public String toString() {
    return toText(network) + "/" + prefix;
  }
}
