package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.function.IntSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The checks of a request before any byte of it reaches a sandbox: its {@code Host} names a port
 * and a sandbox here ({@code {port}-{id}.localhost[:proxyPort]}), the sandbox exists, and the
 * request carries the sandbox's token if it has one; the token is stripped from the head.
 */
final class RequestAuthorizer {
  private static final Pattern HOST =
      Pattern.compile("([1-9][0-9]{0,4})-([a-z0-9]{1,32})\\.localhost(?::([0-9]{1,5}))?");

  private final PortTargets targets;
  private final IntSupplier port;

  /** {@code port}: the proxy's port, as bound (a {@code Host} naming another is refused). */
  RequestAuthorizer(PortTargets targets, IntSupplier port) {
    this.targets = targets;
    this.port = port;
  }

  /** A sandbox and a port in it. */
  record Target(String id, int port) {}

  /**
   * Checks the host, the sandbox and the token (unless the request is for {@code authorized}, the
   * connection's current target), and strips the token from the head.
   */
  Target authorize(RequestHead head, Target authorized) throws BadRequest {
    List<String> hosts = head.values("host");
    if (hosts.size() != 1) {
      throw new BadRequest(400, "exactly one Host header is needed, " + hostForm());
    }
    Matcher m = HOST.matcher(hosts.get(0).strip().toLowerCase(Locale.ROOT));
    if (!m.matches()) {
      throw new BadRequest(
          400, "bad Host '" + Responses.printable(hosts.get(0)) + "': " + hostForm());
    }
    int sandboxPort = Integer.parseInt(m.group(1));
    if (sandboxPort > 65535) {
      throw new BadRequest(400, "bad port " + sandboxPort + " in Host: 1 to 65535");
    }
    if (m.group(3) != null && !m.group(3).equals(Integer.toString(port.getAsInt()))) {
      throw new BadRequest(400, "bad Host: this proxy listens on port " + port.getAsInt());
    }
    String id = m.group(2);
    Path dir = targets.dir(id);
    Target target = new Target(id, sandboxPort);
    if (target.equals(authorized)) {
      head.removeQueryParameter(PortTokens.TOKEN_PARAM);
      head.removeHeader(PortTokens.TOKEN_HEADER.toLowerCase(Locale.ROOT));
      return target;
    }
    if (!targets.isAlive(id)) {
      throw new BadRequest(404, "no sandbox " + targets.ref(id) + " here");
    }
    Optional<String> expected;
    try {
      expected = PortTokens.token(dir);
    } catch (WorkspaceException e) {
      throw new BadRequest(500, "cannot read the sandbox's token");
    }
    List<String> given =
        new ArrayList<>(head.values(PortTokens.TOKEN_HEADER.toLowerCase(Locale.ROOT)));
    given.addAll(head.removeQueryParameter(PortTokens.TOKEN_PARAM));
    head.removeHeader(PortTokens.TOKEN_HEADER.toLowerCase(Locale.ROOT));
    if (expected.isPresent()) {
      byte[] want = expected.get().getBytes(StandardCharsets.UTF_8);
      boolean ok = !given.isEmpty();
      for (String g : given) {
        ok &= MessageDigest.isEqual(want, g.strip().getBytes(StandardCharsets.UTF_8));
      }
      if (!ok) {
        throw new BadRequest(
            401,
            (given.isEmpty() ? "missing" : "wrong")
                + " token for "
                + targets.ref(id)
                + ": send header "
                + PortTokens.TOKEN_HEADER
                + " or query parameter "
                + PortTokens.TOKEN_PARAM);
      }
    }
    return target;
  }

  private String hostForm() {
    return "expected {port}-{id}.localhost:" + port.getAsInt();
  }
}
