package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import java.util.ArrayList;
import java.util.List;

/**
 * What sandbox networking needs of the host, for {@code setup} and {@code doctor}: the nftables
 * library or tool and iproute2 (the kernel's veth support comes with them).
 */
public final class NetworkTools {
  private NetworkTools() {}

  /** The Debian packages sandbox networking needs that are missing: nftables, iproute2. */
  public static List<String> missingPackages() {
    List<String> missing = new ArrayList<>();
    if (Nftables.unavailable().isPresent()) {
      missing.add("nftables");
    }
    if (!HostCommand.onPath("ip")) {
      missing.add("iproute2");
    }
    return missing;
  }

  /** {@code doctor}'s check: the tools sandbox networking uses, and the kernel's veth support. */
  public static HostCheck check() {
    List<String> missing = missingPackages();
    if (!missing.isEmpty()) {
      return HostCheck.missing(
          "networking",
          String.join(", ", missing) + " missing: sandboxes cannot get their network",
          "apt-get install -y --no-install-recommends " + String.join(" ", missing));
    }
    return HostCheck.ok(
        "networking",
        "nftables and iproute2 installed (each sandbox: own network namespace, veth, nftables"
            + " rules; IPv4 forwarding is switched on with the first sandbox)");
  }
}
