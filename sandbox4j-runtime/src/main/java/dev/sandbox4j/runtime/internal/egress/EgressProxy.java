package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.addr.Cidr;
import dev.sandbox4j.runtime.internal.addr.PublicAddresses;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The host-side HTTP/1.1 forward proxy through which sandboxes reach the network, enforcing each
 * sandbox's {@link EgressPolicy}.
 *
 * <p>Who asks is told by the client's source address: {@link PolicyLookup} maps it to the policy of
 * the sandbox that owns it (read per request, so a policy change applies to the next request;
 * tunnels already open stay open). An unknown source is refused. What it serves:
 *
 * <ul>
 *   <li>plain HTTP in absolute form ({@code GET http://host/path HTTP/1.1}): an allowed request is
 *       forwarded on a fresh upstream connection with the policy's header rules for that host set
 *       (replacing same-named headers the client sent); bodies stream both ways (Content-Length or
 *       chunked); the client connection is kept alive between requests when both framings allow it;
 *   <li>{@code CONNECT host:port}: an allowed target gets an opaque tunnel, or, when the policy
 *       says {@link EgressPolicy#interceptTls()} and the client starts TLS, TLS is terminated with
 *       a leaf certificate from the home's {@link ProxyCa}, header rules are set on every request
 *       inside, and each request goes to the real server over TLS verified against the JDK's trust
 *       store (plus an optional extra trust file).
 * </ul>
 *
 * <p>Enforcement: the proxy resolves names itself (hosts file first, then the system resolver), and
 * only connects to an address it checked: never one of {@link PublicAddresses#neverOpen} (the host,
 * loopback, link-local, the engine's own range where the sandboxes and both proxies live), whatever
 * the policy's CIDR rules say; otherwise a public address (see {@link PublicAddresses}) or one a
 * CIDR rule of the policy allows; IP-literal destinations in an allowlist need a CIDR rule. Every
 * port is allowed. A denial is answered at once with {@code 403} and a one-line reason an agent can
 * act on; a name or connection failure with {@code 502}.
 *
 * <p>Limits against hostile clients: message heads of at most {@link HttpWire#MAX_HEAD_BYTES} in
 * {@link HttpWire#MAX_HEADERS} fields, finished within the head timeout however slowly sent;
 * connect and idle timeouts. Connections are capped per client (a sandbox) and in total, so that no
 * sandbox, nor several together, can starve another: each client gets its first {@code
 * reservedPerClient} connections whatever the others hold, and at most {@code maxPerClient} at
 * once; the connections between the two draw on a shared pool of {@code maxConnections}. A
 * connection over a limit is answered {@code 503} with the reason. One virtual thread per
 * connection (two for a tunnel).
 *
 * <p>Non-goals: HTTP/2 and WebSocket upgrades through plain HTTP (they work inside CONNECT
 * tunnels), caching, upstream connection reuse, authentication of clients beyond their address (the
 * network path net-core builds makes the source address unforgeable).
 *
 * <p>The jobs: this class binds, admits ({@link ConnectionLimits}) and closes; {@link
 * ClientConnection} reads a client's requests; {@link PolicyCheck} finds the client's policy and
 * decides each destination; {@link HttpExchange} forwards plain HTTP; {@link ConnectTunnel} serves
 * {@code CONNECT}; {@link TlsInterception} terminates TLS for policies that intercept it; {@link
 * Upstreams} and {@link UpstreamTrust} connect to the destinations.
 *
 * <p>States: running from {@link Builder#start()} until {@link #close()}, which closes the
 * listening socket and every open connection. Thread-safe.
 */
public final class EgressProxy implements AutoCloseable {
  /** The policy of the sandbox a source address belongs to; empty if none. */
  @FunctionalInterface
  public interface PolicyLookup {
    Optional<EgressPolicy> policyFor(InetAddress source);
  }

  static final Logger LOG = Logger.getLogger(EgressProxy.class.getName());

  private final ConnectionContext context;
  private final ConnectionLimits limits;
  private final OpenSockets sockets = new OpenSockets();
  private final ServerSocket server;
  private final Thread acceptor;

  /** Where a home keeps the proxy's files. */
  public static Path hostsFile(Path home) {
    return home.resolve("network").resolve("hosts");
  }

  static Path caDirectory(Path home) {
    return home.resolve("network").resolve("egress-ca");
  }

  /**
   * PEM certificates the proxy trusts for upstream TLS besides the JDK's (a test's fake servers);
   * re-read when it changes.
   */
  static Path upstreamTrustFile(Path home) {
    return home.resolve("network").resolve("upstream-trust.pem");
  }

  /**
   * The PEM certificate of {@code home}'s proxy CA (created if missing), for the network setup to
   * install into a sandbox whose policy intercepts TLS.
   */
  public static String caCertificatePem(Path home) throws IOException {
    return ProxyCa.loadOrCreate(caDirectory(home)).certificatePem();
  }

  public static Builder builder(PolicyLookup lookup) {
    return new Builder(lookup);
  }

  /** Options of a proxy; every one has a default fit for production. */
  public static final class Builder {
    private final PolicyLookup lookup;
    private InetAddress bind = InetAddress.getLoopbackAddress();
    private int port;
    private Path hostsFile;
    private Path caDirectory;
    private Path upstreamTrust;
    private final List<Cidr> alsoPublic = new ArrayList<>();
    private Predicate<InetAddress> notPublic = a -> false;
    private Duration connectTimeout = Duration.ofSeconds(10);
    private Duration idleTimeout = Duration.ofMinutes(5);
    private Duration headTimeout = Duration.ofSeconds(30);
    private Duration tlsSniff = Duration.ofSeconds(2);
    private int maxConnections = 1024;
    private int maxPerClient = 64;
    private int reservedPerClient = 8;

    private Builder(PolicyLookup lookup) {
      this.lookup = java.util.Objects.requireNonNull(lookup, "lookup");
    }

    /**
     * The home's hosts file, CA directory and extra upstream trust file ({@code
     * network/upstream-trust.pem}, used if present).
     */
    public Builder home(Path home) {
      this.hostsFile = EgressProxy.hostsFile(home);
      this.caDirectory = EgressProxy.caDirectory(home);
      this.upstreamTrust = EgressProxy.upstreamTrustFile(home);
      return this;
    }

    public Builder bind(InetAddress address, int port) {
      this.bind = address;
      this.port = port;
      return this;
    }

    public Builder hostsFile(Path file) {
      this.hostsFile = file;
      return this;
    }

    Builder caDirectory(Path dir) {
      this.caDirectory = dir;
      return this;
    }

    /** PEM certificates trusted for upstream TLS besides the JDK's (tests' fake servers). */
    Builder upstreamTrust(Path pemFile) {
      this.upstreamTrust = pemFile;
      return this;
    }

    /**
     * Counts {@code cidr} as public internet although it is not (tests put their fake internet on
     * loopback); never for production use.
     */
    public Builder alsoPublic(String cidr) {
      this.alsoPublic.add(Cidr.parse(cidr));
      return this;
    }

    /**
     * Addresses that are never public whatever their range (other sandboxes: the network setup's
     * {@code Networks.isSandboxSubnet}).
     */
    public Builder notPublic(Predicate<InetAddress> test) {
      this.notPublic = test;
      return this;
    }

    Builder connectTimeout(Duration d) {
      this.connectTimeout = d;
      return this;
    }

    Builder idleTimeout(Duration d) {
      this.idleTimeout = d;
      return this;
    }

    Builder headTimeout(Duration d) {
      this.headTimeout = d;
      return this;
    }

    /**
     * How long a tunnel of an intercepting policy waits for the client's first byte before taking
     * it for a server-speaks-first protocol and tunnelling it blindly.
     */
    Builder tlsSniff(Duration d) {
      this.tlsSniff = d;
      return this;
    }

    /**
     * At most {@code perClient} connections per client at once; each client's first {@code
     * reserved} are always admitted, the rest draw on a pool of {@code shared} for all clients.
     */
    Builder maxConnections(int shared, int perClient, int reserved) {
      if (shared < 0 || reserved < 0 || perClient < Math.max(1, reserved)) {
        throw new IllegalArgumentException(
            "connection limits: need shared >= 0, 0 <= reserved <= perClient, perClient >= 1");
      }
      this.maxConnections = shared;
      this.maxPerClient = perClient;
      this.reservedPerClient = reserved;
      return this;
    }

    /** Binds and starts accepting. */
    public EgressProxy start() throws IOException {
      return new EgressProxy(this);
    }
  }

  private EgressProxy(Builder b) throws IOException {
    UpstreamTrust upstreamTrust = new UpstreamTrust(b.upstreamTrust);
    try {
      upstreamTrust.factory(); // a broken trust file is an error at start, not per request
    } catch (GeneralSecurityException e) {
      throw new IOException("cannot set up upstream TLS: " + e.getMessage(), e);
    }
    List<Cidr> alsoPublic = List.copyOf(b.alsoPublic);
    Predicate<InetAddress> notPublic = b.notPublic;
    Predicate<InetAddress> testInternet =
        a -> alsoPublic.stream().anyMatch(c -> c.contains(PublicAddresses.unmapped(a)));
    Predicate<InetAddress> isPublic =
        a -> !notPublic.test(a) && (PublicAddresses.isPublic(a) || testInternet.test(a));
    Function<InetAddress, Optional<String>> neverOpen =
        a -> {
          if (testInternet.test(a)) {
            return Optional.empty();
          }
          if (notPublic.test(a)) {
            return Optional.of("it is the sandboxes' own network");
          }
          return PublicAddresses.neverOpen(a);
        };
    this.context =
        new ConnectionContext(
            new PolicyCheck(b.lookup, new EgressResolver(b.hostsFile), isPublic, neverOpen),
            new Upstreams(millis(b.connectTimeout), upstreamTrust),
            new ProxyCaSource(b.caDirectory),
            sockets,
            millis(b.idleTimeout),
            b.headTimeout.toNanos(),
            millis(b.tlsSniff));
    this.limits = new ConnectionLimits(b.maxConnections, b.maxPerClient, b.reservedPerClient);
    this.server = new ServerSocket();
    server.setReuseAddress(true);
    server.bind(new InetSocketAddress(b.bind, b.port), 512);
    this.acceptor = Thread.ofVirtual().name("egress-proxy-accept").start(this::acceptLoop);
  }

  public InetSocketAddress address() {
    return (InetSocketAddress) server.getLocalSocketAddress();
  }

  int port() {
    return server.getLocalPort();
  }

  @Override
  public void close() {
    sockets.closeAll(server);
    try {
      acceptor.join(Duration.ofSeconds(5));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void acceptLoop() {
    while (!sockets.isClosed()) {
      Socket client;
      try {
        client = server.accept();
      } catch (IOException e) {
        if (!sockets.isClosed()) {
          LOG.log(Level.WARNING, "egress proxy accept failed", e);
          try {
            Thread.sleep(50); // out of descriptors, say: do not spin while it lasts
          } catch (InterruptedException ie) {
            return;
          }
        }
        continue;
      }
      // Counted here, in accept order, so the limits do not depend on thread scheduling.
      InetAddress source = client.getInetAddress();
      ConnectionLimits.Admission admission = limits.admit(source);
      sockets.add(client);
      String why = admission.refusal();
      boolean holdsPermit = admission.holdsPermit();
      Thread.ofVirtual()
          .name("egress-proxy-conn")
          .start(() -> serve(client, source, why, holdsPermit));
    }
  }

  private void serve(Socket client, InetAddress source, String refusal, boolean holdsPermit) {
    try {
      client.setTcpNoDelay(true);
      if (refusal != null) {
        client.setSoTimeout(1_000);
        Replies.respond(client.getOutputStream(), 503, refusal);
        return;
      }
      new ClientConnection(context, client, source).run();
    } catch (IOException | RuntimeException e) {
      LOG.log(Level.FINE, "egress proxy connection from " + source + " ended", e);
    } finally {
      sockets.remove(client);
      OpenSockets.closeQuietly(client);
      limits.release(source, holdsPermit);
    }
  }

  private static int millis(Duration d) {
    return (int) Math.min(Integer.MAX_VALUE, Math.max(1, d.toMillis()));
  }
}
