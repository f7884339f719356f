package dev.sandbox4j.runtime.internal.net;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The host's nameservers as sandboxes see them: the ones a sandbox in mode ALL may ask, and the
 * {@code /etc/resolv.conf} a new sandbox gets.
 */
final class Nameservers {
  private Nameservers() {}

  /**
   * The host's nameservers, which a sandbox in mode ALL may ask (it gets them in its {@code
   * /etc/resolv.conf}); loopback ones are useless from a sandbox and left out.
   */
  static List<String> publicNameservers() {
    List<String> out = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(Path.of("/etc/resolv.conf"))) {
        String[] f = line.strip().split("\\s+");
        if (f.length >= 2 && f[0].equals("nameserver") && f[1].matches("[0-9.]+")) {
          InetAddress a = InetAddress.getByName(f[1]);
          if (!a.isLoopbackAddress() && !a.isAnyLocalAddress()) {
            out.add(f[1]);
          }
        }
      }
    } catch (IOException e) {
      // no resolver configured: names then resolve through the proxy only
    }
    return out;
  }

  /** The {@code /etc/resolv.conf} a new sandbox gets: the host's usable nameservers. */
  static String resolvConf() {
    StringBuilder s = new StringBuilder();
    for (String ns : publicNameservers()) {
      s.append("nameserver ").append(ns).append('\n');
    }
    return s.toString();
  }
}
