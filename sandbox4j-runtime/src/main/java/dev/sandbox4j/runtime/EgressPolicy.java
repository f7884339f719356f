package dev.sandbox4j.runtime;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.runtime.internal.addr.Cidr;
import dev.sandbox4j.runtime.internal.addr.HostNames;
import dev.sandbox4j.runtime.internal.addr.PublicAddresses;
import dev.sandbox4j.workspace.machine.EgressRules;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Where a sandbox may open connections, and which headers the host-side egress proxy adds on its
 * behalf. Immutable and validated when built: a bad domain, CIDR, header name or value fails at
 * once with an {@link IllegalArgumentException} naming it.
 *
 * <p>Modes:
 *
 * <ul>
 *   <li>{@link Mode#NONE}: nothing leaves the sandbox.
 *   <li>{@link Mode#ALL}: the public internet only. Private, loopback, link-local, carrier-grade
 *       NAT, multicast and reserved ranges, the host's own addresses and other sandboxes stay
 *       unreachable. The default for a new sandbox.
 *   <li>{@link Mode#ALLOWLIST}: only the listed domains (exact {@code api.example.com} or wildcard
 *       {@code *.example.com}, which matches every name below {@code example.com} but not {@code
 *       example.com} itself) and the listed CIDRs ({@code 203.0.113.0/24}; a bare address means
 *       that one address). A domain is reached through the proxy, which resolves it itself and
 *       refuses a name resolving to a non-public address unless a CIDR of the policy allows that
 *       address. A name that matches no domain rule is refused without being resolved, even if it
 *       would resolve into an allowed CIDR: a denied name never reaches DNS, so it cannot carry
 *       data out. Domains compare case-insensitively, a trailing dot ignored. Internationalized
 *       names are written in their ASCII ({@code xn--}) form.
 * </ul>
 *
 * <p><b>What no policy opens.</b> Whatever its rules, no policy reaches the host (any of its
 * addresses), {@code 0.0.0.0/8}, loopback, link-local (IPv4 and IPv6, also in the IPv6 forms that
 * embed an IPv4 address) or the engine's own {@code 10.64.0.0/10} (other sandboxes, their gateway,
 * the egress and port proxies); sandboxes on a shared named network reach each other by that
 * network's rule. {@link #allow} refuses a CIDR that lies inside one of those ranges, naming the
 * range, and narrows one that overlaps them ({@code 0.0.0.0/0}, {@code 10.0.0.0/8}): it opens the
 * rest, and {@link #narrowings()} says what it does not open. The egress proxy and the nftables
 * rules enforce the same list again.
 *
 * <p>Header rules ({@link #withHeader}) make the proxy set a header on requests to matching hosts,
 * replacing any same-named header the sandbox sent: the value (a secret such as an API key) stays
 * on the host and never enters the sandbox. By default a rule reaches only HTTPS requests to port
 * 443 under {@link #withInterceptTls TLS interception}, where the proxy terminates TLS with its own
 * CA (which the sandbox must trust) and re-encrypts to the real server; a rule with listed ports
 * reaches requests to exactly those ports, plain HTTP included (listing a cleartext port sends the
 * secret in cleartext there). Without interception HTTPS passes through the proxy as an opaque
 * tunnel.
 *
 * <p>{@link #toString} never shows header values.
 */
public final class EgressPolicy {

  /** How much of the network a policy opens. */
  public enum Mode {
    /** No egress at all. */
    NONE,
    /** The public internet, nothing private. */
    ALL,
    /** Only the listed domains and CIDRs. */
    ALLOWLIST
  }

  /**
   * One header the proxy sets on requests to hosts matching {@code domain} (a domain rule: exact or
   * {@code *.} wildcard) on {@code ports}: empty means requests to port 443 under TLS interception
   * only; listed ports (1..65535, sorted, no duplicates) mean requests to exactly those ports,
   * cleartext or intercepted TLS. {@link #toString} hides the value.
   */
  public record HeaderRule(String domain, String name, String value, List<Integer> ports) {
    public HeaderRule {
      domain = normalizeDomainRule(domain, "header rule domain");
      name = validateHeaderName(name);
      value = validateHeaderValue(name, value);
      ports = validatePorts(name, ports);
    }

    /** A rule for TLS-intercepted requests to port 443 only. */
    public HeaderRule(String domain, String name, String value) {
      this(domain, name, value, List.of());
    }

    boolean matches(String host) {
      return domainMatches(domain, host);
    }

    /** Whether a request to {@code port}, over intercepted TLS or not, gets this header. */
    boolean appliesTo(int port, boolean tls) {
      return ports.isEmpty() ? tls && port == DEFAULT_HEADER_PORT : ports.contains(port);
    }

    @Override
    public String toString() {
      String where = ports.isEmpty() ? "" : " ports " + ports;
      return domain + where + " " + name + ": <redacted>";
    }
  }

  /** The one port a header rule without listed ports reaches, under TLS interception only. */
  static final int DEFAULT_HEADER_PORT = 443;

  static final int MAX_HEADER_PORTS = 64;

  static final int MAX_RULES = 1_000;
  static final int MAX_HEADER_VALUE = 8 * 1024;
  private static final long MAX_FILE_BYTES = 16L * 1024 * 1024;

  private static final EgressPolicy NONE =
      new EgressPolicy(Mode.NONE, List.of(), List.of(), List.of(), false);
  private static final EgressPolicy ALL =
      new EgressPolicy(Mode.ALL, List.of(), List.of(), List.of(), false);

  private static final Pattern TOKEN = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}");

  /** Headers that frame or route the message: the proxy owns them, a rule may not set them. */
  private static final Set<String> RESERVED_HEADERS =
      Set.of(
          "host",
          "content-length",
          "transfer-encoding",
          "connection",
          "keep-alive",
          "upgrade",
          "te",
          "trailer",
          "proxy-connection",
          "proxy-authorization",
          "proxy-authenticate",
          "expect");

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Mode mode;
  private final List<String> domains;
  private final List<Cidr> cidrs;
  private final List<HeaderRule> headers;
  private final boolean interceptTls;

  private EgressPolicy(
      Mode mode,
      List<String> domains,
      List<Cidr> cidrs,
      List<HeaderRule> headers,
      boolean interceptTls) {
    this.mode = mode;
    this.domains = List.copyOf(domains);
    this.cidrs = List.copyOf(cidrs);
    this.headers = List.copyOf(headers);
    this.interceptTls = interceptTls;
  }

  /** No egress. */
  public static EgressPolicy none() {
    return NONE;
  }

  /** The public internet only; the default for a new sandbox. */
  public static EgressPolicy all() {
    return ALL;
  }

  /**
   * Only these destinations: each rule is a domain ({@code api.example.com}), a wildcard domain
   * ({@code *.example.com}), a CIDR ({@code 198.51.100.0/24}) or a single IP address. An empty list
   * allows nothing (like {@link #none()}, but header rules and CIDRs may be added later).
   *
   * @throws IllegalArgumentException naming the first rule that is not one of those
   */
  public static EgressPolicy allow(String... rules) {
    Objects.requireNonNull(rules, "rules");
    return allow(List.of(rules));
  }

  /**
   * Like {@link #allow(String...)}.
   *
   * @throws IllegalArgumentException naming the first rule that is malformed, or that lies inside a
   *     range no policy opens (loopback, link-local, {@code 0.0.0.0/8}, {@code 10.64.0.0/10}),
   *     naming that range
   */
  public static EgressPolicy allow(List<String> rules) {
    return allow(rules, true);
  }

  /**
   * The allowlist of {@code rules}; {@code strict} refuses CIDRs inside never-open ranges (the
   * API), otherwise they are kept and simply open nothing (a record stored before they were refused
   * must still load: enforcement refuses those ranges anyway).
   */
  private static EgressPolicy allow(List<String> rules, boolean strict) {
    Objects.requireNonNull(rules, "rules");
    if (rules.size() > MAX_RULES) {
      throw new IllegalArgumentException(
          "an egress allowlist holds at most " + MAX_RULES + " rules, not " + rules.size());
    }
    List<String> domains = new ArrayList<>();
    List<Cidr> cidrs = new ArrayList<>();
    for (String rule : rules) {
      if (rule == null) {
        throw new IllegalArgumentException("an egress rule is null");
      }
      String trimmed = rule.strip();
      if (looksLikeAddress(trimmed)) {
        Cidr cidr = Cidr.parse(trimmed);
        if (strict) {
          PublicAddresses.neverOpenHolding(cidr)
              .ifPresent(
                  r -> {
                    throw new IllegalArgumentException(
                        "egress rule '"
                            + trimmed
                            + "' lies inside "
                            + r
                            + ", which no egress policy opens");
                  });
        }
        if (!cidrs.contains(cidr)) {
          cidrs.add(cidr);
        }
      } else {
        String domain = normalizeDomainRule(trimmed, "egress rule");
        if (strict
            && HostNames.isLocalhostName(domain.startsWith("*.") ? domain.substring(2) : domain)) {
          throw new IllegalArgumentException(
              "egress rule '"
                  + trimmed
                  + "' names loopback (localhost and every name below it), which no egress"
                  + " policy opens");
        }
        if (!domains.contains(domain)) {
          domains.add(domain);
        }
      }
    }
    return new EgressPolicy(Mode.ALLOWLIST, domains, cidrs, List.of(), false);
  }

  /**
   * This policy plus a rule that sets header {@code name} to {@code value} on HTTPS requests to
   * port 443 of hosts matching {@code domain} (exact or {@code *.} wildcard), which the proxy sees
   * only under {@link #withInterceptTls TLS interception}. A later rule for the same domain and
   * header name replaces the earlier one. Framing and proxy headers ({@code Host}, {@code
   * Content-Length}, {@code Transfer-Encoding}, {@code Connection}, {@code Proxy-*}, ...) cannot be
   * set.
   *
   * @throws IllegalArgumentException if the domain, name or value is malformed, or the policy is
   *     {@link Mode#NONE} (no request would ever carry the header)
   */
  public EgressPolicy withHeader(String domain, String name, String value) {
    return withHeader(domain, name, value, List.of());
  }

  /**
   * Like {@link #withHeader(String, String, String)}, for requests to exactly {@code ports}, plain
   * HTTP or intercepted HTTPS: listing a port opts into sending the value in cleartext to it. An
   * empty list means the default, intercepted HTTPS to port 443.
   *
   * @throws IllegalArgumentException also if a port is outside 1..65535 or more than {@value
   *     #MAX_HEADER_PORTS} are listed
   */
  public EgressPolicy withHeader(String domain, String name, String value, List<Integer> ports) {
    if (mode == Mode.NONE) {
      throw new IllegalArgumentException(
          "egress policy none sends no request, so it cannot inject header " + name);
    }
    HeaderRule rule = new HeaderRule(domain, name, value, ports);
    List<HeaderRule> next = new ArrayList<>(headers.size() + 1);
    for (HeaderRule old : headers) {
      if (!(old.domain().equals(rule.domain()) && old.name().equalsIgnoreCase(rule.name()))) {
        next.add(old);
      }
    }
    next.add(rule);
    if (next.size() > MAX_RULES) {
      throw new IllegalArgumentException(
          "an egress policy holds at most " + MAX_RULES + " header rules");
    }
    return new EgressPolicy(mode, domains, cidrs, next, interceptTls);
  }

  /**
   * This policy with HTTPS interception on or off. On, the proxy terminates TLS for every CONNECT
   * with a certificate from its own per-home CA (the sandbox must trust that CA) so header rules
   * reach HTTPS requests too; off (the default), HTTPS is an opaque tunnel.
   *
   * @throws IllegalArgumentException if turned on for {@link Mode#NONE}
   */
  public EgressPolicy withInterceptTls(boolean on) {
    if (on && mode == Mode.NONE) {
      throw new IllegalArgumentException("egress policy none has no TLS to intercept");
    }
    return new EgressPolicy(mode, domains, cidrs, headers, on);
  }

  public Mode mode() {
    return mode;
  }

  /** The allowed domain rules, normalized (lower case, no trailing dot); empty unless ALLOWLIST. */
  public List<String> domains() {
    return domains;
  }

  /** The allowed CIDRs in canonical form ({@code 198.51.100.0/24}); empty unless ALLOWLIST. */
  public List<String> cidrs() {
    return cidrs.stream().map(Cidr::toString).toList();
  }

  /**
   * What this policy's CIDR rules do not open although they cover it, one line per narrowed rule
   * (for {@code 0.0.0.0/0}: loopback, link-local, the engine's range, ...); empty if no rule is
   * narrowed. Whatever a rule covers, the host's own addresses are never opened either.
   */
  public List<String> narrowings() {
    List<String> out = new ArrayList<>();
    for (Cidr cidr : cidrs) {
      List<String> within = PublicAddresses.neverOpenWithin(cidr);
      if (!within.isEmpty()) {
        out.add("egress rule " + cidr + " does not open " + String.join(", ", within));
      }
    }
    return out;
  }

  /** The header rules, in the order they were added. */
  public List<HeaderRule> headerRules() {
    return headers;
  }

  /** Whether the proxy terminates TLS to inject headers into HTTPS requests. */
  public boolean interceptTls() {
    return interceptTls;
  }

  // ---- what the proxy asks ----

  /**
   * Whether a request to the host name {@code host} may go ahead (before resolving it): ALL allows
   * every name, ALLOWLIST the names matching a domain rule.
   */
  public boolean allowsName(String host) {
    return switch (mode) {
      case NONE -> false;
      case ALL -> true;
      case ALLOWLIST -> {
        String h = HostNames.normalizeHost(host);
        for (String rule : domains) {
          if (domainMatches(rule, h)) {
            yield true;
          }
        }
        yield false;
      }
    };
  }

  /** Whether a CIDR rule of this policy covers {@code address} (which then may be reached). */
  public boolean cidrAllows(InetAddress address) {
    for (Cidr cidr : cidrs) {
      if (cidr.contains(address)) {
        return true;
      }
    }
    return false;
  }

  /**
   * The headers to set on a request to {@code host:port}, over intercepted TLS if {@code tls}: name
   * → value, later rules winning.
   */
  public Map<String, String> headersFor(String host, int port, boolean tls) {
    if (headers.isEmpty()) {
      return Map.of();
    }
    String h = HostNames.normalizeHost(host);
    Map<String, String> out = new LinkedHashMap<>();
    for (HeaderRule rule : headers) {
      if (rule.matches(h) && rule.appliesTo(port, tls)) {
        out.keySet().removeIf(k -> k.equalsIgnoreCase(rule.name()));
        out.put(rule.name(), rule.value());
      }
    }
    return out;
  }

  /** A short description of what is allowed, for denial messages (no secrets). */
  public String describeAllowed() {
    return switch (mode) {
      case NONE -> "nothing";
      case ALL -> "the public internet";
      case ALLOWLIST -> {
        List<String> all = new ArrayList<>(domains);
        all.addAll(cidrs());
        if (all.isEmpty()) {
          yield "nothing";
        }
        String joined = String.join(", ", all.subList(0, Math.min(all.size(), 10)));
        yield all.size() > 10 ? joined + ", ... (" + all.size() + " rules)" : joined;
      }
    };
  }

  // ---- the machine capability's value ----

  /**
   * The policy that {@code rules} ({@link dev.sandbox4j.workspace.machine.SupportsEgress}'s value)
   * state, validated as the factories do.
   *
   * @throws IllegalArgumentException naming the first rule that is malformed or refused
   */
  public static EgressPolicy of(EgressRules rules) {
    Objects.requireNonNull(rules, "rules");
    EgressPolicy policy =
        switch (rules.mode()) {
          case NONE -> NONE;
          case ALL -> ALL;
          case ALLOWLIST -> allow(rules.allow());
        };
    for (EgressRules.Header h : rules.headers()) {
      policy = policy.withHeader(h.domain(), h.name(), h.value(), h.ports());
    }
    return rules.interceptTls() ? policy.withInterceptTls(true) : policy;
  }

  /** This policy as the machine capability's value, header values included. */
  public EgressRules toRules() {
    List<String> allow = new ArrayList<>(domains);
    allow.addAll(cidrs());
    return new EgressRules(
        EgressRules.Mode.valueOf(mode.name()),
        allow,
        headers.stream()
            .map(h -> new EgressRules.Header(h.domain(), h.name(), h.value(), h.ports()))
            .toList(),
        interceptTls);
  }

  // ---- JSON (storage in the engine home) ----

  /** The JSON form stored in the home, header values included: keep it in a 0600 file. */
  public String toJson() {
    ObjectNode root = JSON.createObjectNode();
    root.put("mode", mode.name().toLowerCase(Locale.ROOT));
    ArrayNode allow = root.putArray("allow");
    domains.forEach(allow::add);
    cidrs.forEach(c -> allow.add(c.toString()));
    ArrayNode hs = root.putArray("headers");
    for (HeaderRule h : headers) {
      ObjectNode rule =
          hs.addObject().put("domain", h.domain()).put("name", h.name()).put("value", h.value());
      if (!h.ports().isEmpty()) {
        h.ports().forEach(rule.putArray("ports")::add);
      }
    }
    root.put("interceptTls", interceptTls);
    try {
      return JSON.writeValueAsString(root);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Reads {@link #toJson}'s form, validating it as the factories do.
   *
   * @throws IllegalArgumentException if it is not JSON of that form or a rule is malformed
   */
  public static EgressPolicy fromJson(String json) {
    JsonNode root;
    try {
      root = JSON.readTree(json);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "egress policy is not valid JSON: " + e.getOriginalMessage());
    }
    if (root == null || !root.isObject()) {
      throw new IllegalArgumentException("egress policy JSON is not an object");
    }
    String modeText = text(root, "mode");
    Mode mode;
    try {
      mode = Mode.valueOf(modeText.toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "egress policy mode must be none, all or allowlist, not " + modeText);
    }
    List<String> allow = new ArrayList<>();
    JsonNode allowNode = root.path("allow");
    if (!allowNode.isMissingNode() && !allowNode.isNull()) {
      if (!allowNode.isArray()) {
        throw new IllegalArgumentException("egress policy allow must be an array");
      }
      for (JsonNode n : allowNode) {
        if (!n.isTextual()) {
          throw new IllegalArgumentException("egress policy allow holds a non-string: " + n);
        }
        allow.add(n.asText());
      }
    }
    EgressPolicy policy =
        switch (mode) {
          case NONE -> NONE;
          case ALL -> ALL;
          case ALLOWLIST -> allow(allow, false);
        };
    if (mode != Mode.ALLOWLIST && !allow.isEmpty()) {
      throw new IllegalArgumentException(
          "egress policy " + modeText + " takes no allow rules, found " + allow.size());
    }
    JsonNode hs = root.path("headers");
    if (!hs.isMissingNode() && !hs.isNull()) {
      if (!hs.isArray()) {
        throw new IllegalArgumentException("egress policy headers must be an array");
      }
      for (JsonNode h : hs) {
        if (!h.isObject()) {
          throw new IllegalArgumentException("egress policy header rule is not an object");
        }
        policy = policy.withHeader(text(h, "domain"), text(h, "name"), text(h, "value"), ports(h));
      }
    }
    JsonNode intercept = root.path("interceptTls");
    if (!intercept.isMissingNode() && !intercept.isNull()) {
      if (!intercept.isBoolean()) {
        throw new IllegalArgumentException("egress policy interceptTls must be true or false");
      }
      policy = policy.withInterceptTls(intercept.booleanValue());
    }
    return policy;
  }

  private static List<Integer> ports(JsonNode header) {
    JsonNode ports = header.path("ports");
    if (ports.isMissingNode() || ports.isNull()) {
      return List.of();
    }
    if (!ports.isArray() || ports.size() > MAX_HEADER_PORTS) {
      throw new IllegalArgumentException(
          "egress policy header ports must be an array of at most " + MAX_HEADER_PORTS + " ports");
    }
    List<Integer> out = new ArrayList<>();
    for (JsonNode p : ports) {
      if (!p.isInt()) {
        throw new IllegalArgumentException("egress policy header port is not a number: " + p);
      }
      out.add(p.intValue());
    }
    return out;
  }

  private static String text(JsonNode node, String field) {
    JsonNode v = node.get(field);
    if (v == null || !v.isTextual()) {
      throw new IllegalArgumentException("egress policy JSON lacks string field " + field);
    }
    return v.asText();
  }

  // ---- value semantics ----

  @Override
  public boolean equals(Object o) {
    return o instanceof EgressPolicy p
        && mode == p.mode
        && interceptTls == p.interceptTls
        && domains.equals(p.domains)
        && cidrs.equals(p.cidrs)
        && headers.equals(p.headers);
  }

  @Override
  public int hashCode() {
    return Objects.hash(mode, domains, cidrs, headers, interceptTls);
  }

  @Override
  public String toString() {
    StringBuilder s =
        new StringBuilder("EgressPolicy[").append(mode.name().toLowerCase(Locale.ROOT));
    if (mode == Mode.ALLOWLIST) {
      List<String> all = new ArrayList<>(domains);
      all.addAll(cidrs());
      s.append(' ').append(all);
    }
    if (!headers.isEmpty()) {
      s.append(", headers ").append(headers);
    }
    if (interceptTls) {
      s.append(", interceptTls");
    }
    return s.append(']').toString();
  }

  // ---- syntax ----

  static boolean domainMatches(String rule, String host) {
    if (rule.startsWith("*.")) {
      String suffix = rule.substring(1); // ".example.com"
      return host.length() > suffix.length() && host.endsWith(suffix);
    }
    return rule.equals(host);
  }

  private static String normalizeDomainRule(String rule, String what) {
    if (rule == null) {
      throw new IllegalArgumentException(what + " is null");
    }
    String r = HostNames.normalizeHost(rule.strip());
    String name = r.startsWith("*.") ? r.substring(2) : r;
    if (name.isEmpty() || !HostNames.isValidHostName(name) || name.endsWith(".")) {
      throw new IllegalArgumentException(
          what
              + " '"
              + rule
              + "' is not a domain (api.example.com), a wildcard (*.example.com), a CIDR"
              + " (198.51.100.0/24) or an IP address; write international names in xn-- form");
    }
    return r;
  }

  private static boolean looksLikeAddress(String rule) {
    return rule.contains(":") || rule.contains("/") || rule.matches("[0-9.]+");
  }

  private static String validateHeaderName(String name) {
    if (name == null || !TOKEN.matcher(name).matches()) {
      throw new IllegalArgumentException("header name '" + name + "' is not an HTTP token");
    }
    if (RESERVED_HEADERS.contains(name.toLowerCase(Locale.ROOT))) {
      throw new IllegalArgumentException(
          "header " + name + " frames or routes the request; a header rule cannot set it");
    }
    return name;
  }

  private static List<Integer> validatePorts(String name, List<Integer> ports) {
    if (ports == null) {
      throw new IllegalArgumentException("header " + name + " has a null port list");
    }
    if (ports.size() > MAX_HEADER_PORTS) {
      throw new IllegalArgumentException(
          "header " + name + " lists more than " + MAX_HEADER_PORTS + " ports");
    }
    java.util.TreeSet<Integer> sorted = new java.util.TreeSet<>();
    for (Integer p : ports) {
      if (p == null || p < 1 || p > 65535) {
        throw new IllegalArgumentException(
            "header " + name + " port " + p + " is outside 1..65535");
      }
      sorted.add(p);
    }
    return List.copyOf(sorted);
  }

  private static String validateHeaderValue(String name, String value) {
    if (value == null) {
      throw new IllegalArgumentException("header " + name + " has a null value");
    }
    if (value.length() > MAX_HEADER_VALUE) {
      throw new IllegalArgumentException(
          "header " + name + " value is longer than " + MAX_HEADER_VALUE + " characters");
    }
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if ((c < 0x20 && c != '\t') || c == 0x7f || c > 0xff) {
        // The value is a secret: say where, never what.
        throw new IllegalArgumentException(
            "header " + name + " value has a forbidden character at index " + i);
      }
    }
    return value;
  }
}
