package dev.sandbox4j.runtime.internal.net;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The host-global names of one home's networking: its nftables table, each sandbox's network
 * namespace (under {@code /run/netns}) and host-side veth. Each carries a hash of the home, so two
 * homes on one host never collide.
 */
final class HostNames {
  static final Path NETNS_DIR = Path.of("/run/netns");

  private final String hash;

  HostNames(Path home) {
    this.hash = hashOf(home);
  }

  static String hashOf(Path home) {
    try {
      byte[] d =
          MessageDigest.getInstance("SHA-256")
              .digest(
                  home.toAbsolutePath().normalize().toString().getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(d, 0, 3).substring(0, 5);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The hash of the home that every name here carries. */
  String hash() {
    return hash;
  }

  String table() {
    return "s4j_" + hash;
  }

  String netnsName(String id) {
    return "s4j-" + hash + "-" + id;
  }

  Path netnsPath(String id) {
    return NETNS_DIR.resolve(netnsName(id));
  }

  String vethName(int slot) {
    return "s4" + hash + "-" + Integer.toString(slot, 36);
  }
}
