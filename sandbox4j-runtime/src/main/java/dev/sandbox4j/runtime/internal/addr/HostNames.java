package dev.sandbox4j.runtime.internal.addr;

import java.util.Locale;
import java.util.regex.Pattern;

/** The syntax of host names as egress rules and requests name them. */
public final class HostNames {
  private HostNames() {}

  private static final Pattern LABEL = Pattern.compile("[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?");

  /** Lower case, trailing dot removed; used for host names coming from requests. */
  public static String normalizeHost(String host) {
    String h = host.toLowerCase(Locale.ROOT);
    return h.endsWith(".") ? h.substring(0, h.length() - 1) : h;
  }

  /** Whether {@code host} (normalized) is {@code localhost} or a name below it: loopback. */
  public static boolean isLocalhostName(String host) {
    return host.equals("localhost") || host.endsWith(".localhost");
  }

  /** Whether {@code text} is a valid host name (the form a request may name). */
  public static boolean isValidHostName(String text) {
    String h = normalizeHost(text);
    if (h.isEmpty() || h.length() > 253) {
      return false;
    }
    for (String label : h.split("\\.", -1)) {
      if (!LABEL.matcher(label).matches()) {
        return false;
      }
    }
    return true;
  }
}
