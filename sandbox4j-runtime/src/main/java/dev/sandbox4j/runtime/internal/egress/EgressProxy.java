package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.addr.Cidr;
import dev.sandbox4j.runtime.internal.addr.HostNames;
import dev.sandbox4j.runtime.internal.addr.PublicAddresses;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import java.util.logging.Level;
import java.util.logging.Logger;
import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

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
 * <p>States: running from {@link Builder#start()} until {@link #close()}, which closes the
 * listening socket and every open connection. Thread-safe.
 */
public final class EgressProxy implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(EgressProxy.class.getName());

  /** The policy of the sandbox a source address belongs to; empty if none. */
  @FunctionalInterface
  public interface PolicyLookup {
    Optional<EgressPolicy> policyFor(InetAddress source);
  }

  /** Hop-by-hop fields (RFC 9110 7.6.1) and what the proxy itself sets: never forwarded. */
  private static final Set<String> HOP_BY_HOP =
      Set.of(
          "connection",
          "keep-alive",
          "proxy-connection",
          "proxy-authorization",
          "proxy-authenticate",
          "te",
          "upgrade",
          "transfer-encoding",
          "content-length",
          "host",
          "expect");

  private static final int BUFFER = 64 * 1024;

  /**
   * Output buffers gather heads; bodies pass them by (a write larger than the buffer goes through).
   */
  private static final int HEAD_BUFFER = 16 * 1024;

  private static final byte TLS_HANDSHAKE = 0x16;

  private final PolicyLookup lookup;
  private final EgressResolver resolver;
  private final ProxyCaSource ca;
  private final UpstreamTrust upstreamTrust;
  private final Predicate<InetAddress> isPublic;
  private final java.util.function.Function<InetAddress, Optional<String>> neverOpen;
  private final int connectTimeout;
  private final int idleTimeout;
  private final long headTimeoutNanos;
  private final int tlsSniffMillis;
  private final Semaphore connections;
  private final int maxConnections;
  private final int maxPerClient;
  private final int reservedPerClient;
  private final ConcurrentHashMap<InetAddress, AtomicInteger> perClient = new ConcurrentHashMap<>();
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private final ServerSocket server;
  private final Thread acceptor;
  private volatile boolean closed;

  /** Lazily loads the CA: a proxy whose sandboxes never opt in never creates one. */
  private static final class ProxyCaSource {
    private final Path dir;
    private ProxyCa ca;

    ProxyCaSource(Path dir) {
      this.dir = dir;
    }

    synchronized ProxyCa get() throws IOException {
      if (dir == null) {
        throw new IOException("this egress proxy has no CA directory");
      }
      if (ca == null) {
        ca = ProxyCa.loadOrCreate(dir);
      }
      return ca;
    }
  }

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

  /** The client TLS factory for upstream servers, rebuilt when the extra trust file changes. */
  private static final class UpstreamTrust {
    private final Path file;

    /** Guarded by {@code this}. */
    private SSLSocketFactory factory;

    private String seen;

    UpstreamTrust(Path file) {
      this.file = file;
    }

    synchronized SSLSocketFactory factory() throws GeneralSecurityException, IOException {
      String now = "none";
      if (file != null && Files.exists(file)) {
        now = Files.getLastModifiedTime(file) + "/" + Files.size(file);
      }
      if (factory == null || !now.equals(seen)) {
        factory = upstreamContext(now.equals("none") ? null : file).getSocketFactory();
        seen = now;
      }
      return factory;
    }
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
    this.lookup = b.lookup;
    this.resolver = new EgressResolver(b.hostsFile);
    this.ca = new ProxyCaSource(b.caDirectory);
    this.upstreamTrust = new UpstreamTrust(b.upstreamTrust);
    try {
      upstreamTrust.factory(); // a broken trust file is an error at start, not per request
    } catch (GeneralSecurityException e) {
      throw new IOException("cannot set up upstream TLS: " + e.getMessage(), e);
    }
    List<Cidr> alsoPublic = List.copyOf(b.alsoPublic);
    Predicate<InetAddress> notPublic = b.notPublic;
    Predicate<InetAddress> testInternet =
        a -> alsoPublic.stream().anyMatch(c -> c.contains(PublicAddresses.unmapped(a)));
    this.isPublic =
        a -> !notPublic.test(a) && (PublicAddresses.isPublic(a) || testInternet.test(a));
    this.neverOpen =
        a -> {
          if (testInternet.test(a)) {
            return Optional.empty();
          }
          if (notPublic.test(a)) {
            return Optional.of("it is the sandboxes' own network");
          }
          return PublicAddresses.neverOpen(a);
        };
    this.connectTimeout = millis(b.connectTimeout);
    this.idleTimeout = millis(b.idleTimeout);
    this.headTimeoutNanos = b.headTimeout.toNanos();
    this.tlsSniffMillis = millis(b.tlsSniff);
    this.connections = new Semaphore(b.maxConnections);
    this.maxConnections = b.maxConnections;
    this.maxPerClient = b.maxPerClient;
    this.reservedPerClient = b.reservedPerClient;
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
    closed = true;
    closeQuietly(server);
    for (Socket s : open) {
      closeQuietly(s);
    }
    try {
      acceptor.join(Duration.ofSeconds(5));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void acceptLoop() {
    while (!closed) {
      Socket client;
      try {
        client = server.accept();
      } catch (IOException e) {
        if (!closed) {
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
      // compute/computeIfPresent: a count and its removal at zero are atomic per source.
      int count =
          perClient
              .compute(source, (k, v) -> v == null ? new AtomicInteger(1) : increment(v))
              .get();
      // A client's first connections need no permit: however many the others hold, it gets in.
      String refusal = null;
      boolean permit = false;
      if (count > maxPerClient) {
        refusal =
            "sandbox4j egress proxy: too many open connections from "
                + source.getHostAddress()
                + " ("
                + maxPerClient
                + " at once per sandbox); close some and retry";
      } else if (count > reservedPerClient) {
        permit = connections.tryAcquire();
        if (!permit) {
          refusal =
              "sandbox4j egress proxy: too many open connections from "
                  + source.getHostAddress()
                  + " while the proxy is busy (all "
                  + maxConnections
                  + " shared connections in use; each sandbox keeps "
                  + reservedPerClient
                  + " of its own); close some and retry";
        }
      }
      open.add(client);
      String why = refusal;
      boolean holdsPermit = permit;
      Thread.ofVirtual()
          .name("egress-proxy-conn")
          .start(() -> serve(client, source, why, holdsPermit));
    }
  }

  private static AtomicInteger increment(AtomicInteger v) {
    v.incrementAndGet();
    return v;
  }

  // ---- one client connection ----

  private void serve(Socket client, InetAddress source, String refusal, boolean holdsPermit) {
    try {
      client.setTcpNoDelay(true);
      if (refusal != null) {
        client.setSoTimeout(1_000);
        respond(client.getOutputStream(), 503, refusal);
        return;
      }
      new Connection(client, source).run();
    } catch (IOException | RuntimeException e) {
      LOG.log(Level.FINE, "egress proxy connection from " + source + " ended", e);
    } finally {
      open.remove(client);
      closeQuietly(client);
      if (holdsPermit) {
        connections.release();
      }
      perClient.computeIfPresent(source, (k, v) -> v.decrementAndGet() == 0 ? null : v);
    }
  }

  /** A denial or failure to answer with {@code status} and {@code message}. */
  private static final class Refusal extends Exception {
    final int status;

    Refusal(int status, String message) {
      super(message, null, false, false);
      this.status = status;
    }
  }

  /** An address the policy allows, and what the client asked for. */
  private record Target(String host, int port, List<InetAddress> addresses) {}

  private final class Connection {
    private final Socket client;
    private final InetAddress source;
    private final byte[] scratch = new byte[BUFFER];

    Connection(Socket client, InetAddress source) {
      this.client = client;
      this.source = source;
    }

    void run() throws IOException {
      HttpWire in = new HttpWire(client, idleTimeout);
      OutputStream out = new BufferedOutputStream(client.getOutputStream(), HEAD_BUFFER);
      while (!closed) {
        HttpWire.Head head;
        String method;
        try {
          head = in.readHead(System.nanoTime() + headTimeoutNanos);
          if (head == null) {
            return;
          }
          String[] parts = requestLine(head);
          method = parts[0];
          EgressPolicy policy = policy();
          if (method.equals("CONNECT")) {
            connect(parts[1], policy, in, out);
            return;
          }
          if (!forward(parts, head, policy, in, out)) {
            return;
          }
        } catch (HttpWire.Malformed e) {
          respond(out, e.status, "sandbox4j egress proxy: bad request: " + e.getMessage());
          return;
        } catch (Refusal e) {
          respond(out, e.status, e.getMessage());
          return;
        } catch (SocketTimeoutException e) {
          return; // a slow or idle client: drop it without a word
        }
      }
    }

    private EgressPolicy policy() throws Refusal {
      Optional<EgressPolicy> policy;
      try {
        policy = lookup.policyFor(source);
      } catch (RuntimeException e) {
        LOG.log(Level.WARNING, "egress policy lookup failed for " + source, e);
        throw new Refusal(
            500, "sandbox4j egress proxy: cannot read the egress policy: " + e.getMessage());
      }
      return policy.orElseThrow(
          () ->
              new Refusal(
                  403,
                  "sandbox4j egress proxy: "
                      + source.getHostAddress()
                      + " is not a sandbox this proxy serves"));
    }

    // ---- CONNECT ----

    private void connect(String authority, EgressPolicy policy, HttpWire in, OutputStream out)
        throws IOException, Refusal, HttpWire.Malformed {
      String[] hp = splitAuthority(authority, -1);
      Target target = decide(policy, hp[0], Integer.parseInt(hp[1]));
      // Connect before answering, so an unreachable target is a 502 the client sees.
      try (Socket upstream = open(target)) {
        writeAscii(out, "HTTP/1.1 200 Connection established\r\n\r\n");
        out.flush();
        byte[] early = in.buffered();
        if (policy.interceptTls()) {
          if (early.length == 0) {
            // What the client sends first decides: TLS is intercepted, anything else tunnelled.
            client.setSoTimeout(tlsSniffMillis);
            int first;
            try {
              first = client.getInputStream().read();
            } catch (SocketTimeoutException e) {
              first = -2; // the server speaks first (ssh, smtp): a plain tunnel
            }
            if (first == -1) {
              return;
            }
            early = first == -2 ? new byte[0] : new byte[] {(byte) first};
          }
          if (early.length > 0 && early[0] == TLS_HANDSHAKE) {
            closeQuietly(upstream); // each intercepted request opens its own TLS connection
            intercept(target, policy, early);
            return;
          }
        }
        tunnel(upstream, early);
      }
    }

    /** Copies bytes both ways until both sides have finished or the tunnel idles out. */
    private void tunnel(Socket upstream, byte[] early) throws IOException {
      open.add(upstream);
      try {
        AtomicLong last = new AtomicLong(System.nanoTime());
        OutputStream up = upstream.getOutputStream();
        if (early.length > 0) {
          up.write(early);
        }
        Thread back =
            Thread.ofVirtual()
                .name("egress-proxy-tunnel")
                .start(() -> pump(upstream, client, last, new byte[BUFFER]));
        pump(client, upstream, last, scratch);
        try {
          back.join();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      } finally {
        open.remove(upstream);
      }
    }

    // ---- TLS interception ----

    private void intercept(Target target, EgressPolicy firstPolicy, byte[] early)
        throws IOException {
      SSLSocket tls;
      try {
        SSLContext context = ca.get().serverContext(target.host());
        tls =
            (SSLSocket)
                context
                    .getSocketFactory()
                    .createSocket(client, new ByteArrayInputStream(early), true);
        tls.setUseClientMode(false);
        SSLParameters params = tls.getSSLParameters();
        params.setApplicationProtocols(new String[] {"http/1.1"});
        tls.setSSLParameters(params);
        client.setSoTimeout((int) Math.max(1, headTimeoutNanos / 1_000_000));
        tls.startHandshake();
      } catch (GeneralSecurityException | SSLException e) {
        LOG.log(Level.FINE, "TLS interception handshake with " + source + " failed", e);
        return;
      }
      open.add(tls);
      try {
        HttpWire in = new HttpWire(tls, idleTimeout);
        OutputStream out = new BufferedOutputStream(tls.getOutputStream(), HEAD_BUFFER);
        EgressPolicy policy = firstPolicy;
        while (!closed) {
          try {
            HttpWire.Head head = in.readHead(System.nanoTime() + headTimeoutNanos);
            if (head == null) {
              return;
            }
            String[] parts = requestLine(head);
            if (parts[0].equals("CONNECT") || !parts[1].startsWith("/")) {
              throw new HttpWire.Malformed(
                  400, "inside an intercepted tunnel, send origin-form requests (GET /path)");
            }
            String host = head.get("Host");
            if (host != null && !sameHost(host, target.host())) {
              throw new Refusal(
                  421,
                  "sandbox4j egress proxy: this tunnel goes to "
                      + target.host()
                      + ", not "
                      + HttpWire.printable(host));
            }
            policy = policy();
            Target now = decide(policy, target.host(), target.port());
            if (!exchange(parts, head, policy, now, true, in, out)) {
              return;
            }
          } catch (HttpWire.Malformed e) {
            respond(out, e.status, "sandbox4j egress proxy: bad request: " + e.getMessage());
            return;
          } catch (Refusal e) {
            respond(out, e.status, e.getMessage());
            return;
          } catch (SocketTimeoutException e) {
            return;
          }
        }
      } finally {
        open.remove(tls);
      }
    }

    // ---- plain HTTP ----

    /** Forwards one absolute-form request; whether the client connection may carry another. */
    private boolean forward(
        String[] parts, HttpWire.Head head, EgressPolicy policy, HttpWire in, OutputStream out)
        throws IOException, HttpWire.Malformed, Refusal {
      String uri = parts[1];
      if (!uri.regionMatches(true, 0, "http://", 0, 7)) {
        if (uri.regionMatches(true, 0, "https://", 0, 8)) {
          throw new HttpWire.Malformed(400, "send https:// requests through CONNECT");
        }
        throw new HttpWire.Malformed(
            400, "this is an egress proxy: send absolute-form requests (GET http://host/path)");
      }
      int pathStart = uri.length();
      for (int i = 7; i < uri.length(); i++) {
        char c = uri.charAt(i);
        if (c == '/' || c == '?' || c == '#') {
          pathStart = i;
          break;
        }
      }
      String authority = uri.substring(7, pathStart);
      String path = pathStart == uri.length() ? "/" : uri.substring(pathStart);
      if (path.startsWith("?")) {
        path = "/" + path;
      }
      int hash = path.indexOf('#');
      if (hash >= 0) {
        path = path.substring(0, hash);
      }
      String[] hp = splitAuthority(authority, 80);
      Target target = decide(policy, hp[0], Integer.parseInt(hp[1]));
      return exchange(
          new String[] {parts[0], path, parts[2]}, head, policy, target, false, in, out);
    }

    /**
     * Sends one request to {@code target} (over TLS if {@code tls}) and its response back.
     *
     * @return whether the client connection may carry another request
     */
    private boolean exchange(
        String[] parts,
        HttpWire.Head head,
        EgressPolicy policy,
        Target target,
        boolean tls,
        HttpWire in,
        OutputStream out)
        throws IOException, HttpWire.Malformed, Refusal {
      String method = parts[0];
      HttpWire.Framing body = HttpWire.requestFraming(head);
      if (parts[2].equals("HTTP/1.0") && body instanceof HttpWire.Framing.Chunked) {
        throw new HttpWire.Malformed(400, "HTTP/1.0 has no chunked encoding");
      }
      boolean clientKeepAlive =
          parts[2].equals("HTTP/1.1")
              ? !head.hasToken("Connection", "close")
              : head.hasToken("Connection", "keep-alive");
      Socket upstream = tls ? openTls(target) : open(target);
      open.add(upstream);
      try {
        upstream.setSoTimeout(idleTimeout);
        OutputStream up = new BufferedOutputStream(upstream.getOutputStream(), HEAD_BUFFER);
        writeRequestHead(up, parts, head, policy, target, body, tls);
        if (head.hasToken("Expect", "100-continue")) {
          // The proxy asks upstream nothing about it: it says go on itself, then streams.
          writeAscii(out, "HTTP/1.1 100 Continue\r\n\r\n");
          out.flush();
        }
        boolean bodySent = true;
        try {
          in.copyBody(body, up, scratch);
          up.flush();
        } catch (SocketException e) {
          bodySent = false; // upstream answered early and closed; its answer may still be there
        }
        HttpWire upIn = new HttpWire(upstream, idleTimeout);
        HttpWire.Head response;
        int status;
        while (true) {
          try {
            response = upIn.readHead(System.nanoTime() + (long) idleTimeout * 1_000_000);
            status = response == null ? 0 : statusOf(response);
          } catch (HttpWire.Malformed e) {
            throw new Refusal(
                502,
                "sandbox4j egress proxy: "
                    + target.host()
                    + " sent a bad response: "
                    + e.getMessage());
          } catch (SocketTimeoutException e) {
            throw new Refusal(
                504, "sandbox4j egress proxy: " + target.host() + " did not answer in time");
          }
          if (response == null) {
            throw new Refusal(
                502,
                "sandbox4j egress proxy: "
                    + target.host()
                    + " closed the connection without a response");
          }
          if (status == 100 || status == 102 || status == 103) {
            if (status != 100) {
              writeResponseHead(out, response, false);
              out.flush();
            }
            continue;
          }
          if (status == 101) {
            throw new Refusal(
                502, "sandbox4j egress proxy: protocol upgrades pass only through CONNECT");
          }
          break;
        }
        HttpWire.Framing responseBody;
        try {
          responseBody = HttpWire.responseFraming(method, status, response);
        } catch (HttpWire.Malformed e) {
          throw new Refusal(
              502,
              "sandbox4j egress proxy: "
                  + target.host()
                  + " sent a bad response: "
                  + e.getMessage());
        }
        boolean keep =
            clientKeepAlive && bodySent && !(responseBody instanceof HttpWire.Framing.UntilClose);
        writeResponseHead(out, response, !keep);
        try {
          upIn.copyBody(responseBody, out, scratch);
        } catch (HttpWire.Malformed e) {
          return false; // the head is out: all that can be said is to close
        }
        out.flush();
        return keep;
      } finally {
        open.remove(upstream);
        closeQuietly(upstream);
      }
    }

    private void writeRequestHead(
        OutputStream up,
        String[] parts,
        HttpWire.Head head,
        EgressPolicy policy,
        Target target,
        HttpWire.Framing body,
        boolean tls)
        throws IOException {
      Map<String, String> inject = policy.headersFor(target.host(), target.port(), tls);
      Set<String> drop = new HashSet<>(HOP_BY_HOP);
      for (String v : head.all("Connection")) {
        for (String t : v.split(",")) {
          drop.add(t.strip().toLowerCase(Locale.ROOT));
        }
      }
      inject.keySet().forEach(k -> drop.add(k.toLowerCase(Locale.ROOT)));
      StringBuilder b = new StringBuilder(512);
      // An HTTP/1.0 client's request goes up as 1.0, so no chunked answer comes back to it.
      b.append(parts[0]).append(' ').append(parts[1]).append(' ').append(parts[2]).append("\r\n");
      String hostHeader = target.host().contains(":") ? "[" + target.host() + "]" : target.host();
      b.append("Host: ").append(hostHeader);
      if (target.port() != (tls ? 443 : 80)) {
        b.append(':').append(target.port());
      }
      b.append("\r\n");
      for (String[] f : head.fields()) {
        if (!drop.contains(f[0].toLowerCase(Locale.ROOT))) {
          b.append(f[0]).append(": ").append(f[1]).append("\r\n");
        }
      }
      inject.forEach((k, v) -> b.append(k).append(": ").append(v).append("\r\n"));
      switch (body) {
        case HttpWire.Framing.Chunked c -> b.append("Transfer-Encoding: chunked\r\n");
        case HttpWire.Framing.Length l ->
            b.append("Content-Length: ").append(l.bytes()).append("\r\n");
        default -> {}
      }
      b.append("Connection: close\r\n\r\n");
      up.write(b.toString().getBytes(StandardCharsets.ISO_8859_1));
    }

    // ---- decisions ----

    /** What the policy says about {@code host:port}: the addresses to try, or a refusal. */
    private Target decide(EgressPolicy policy, String rawHost, int port) throws Refusal {
      String host = HostNames.normalizeHost(rawHost);
      InetAddress literal = literal(host);
      if (literal != null) {
        Optional<String> closed = neverOpen.apply(literal);
        if (closed.isPresent()) {
          throw neverOpened(host, literal, closed.get());
        }
        boolean ok =
            policy.mode() != EgressPolicy.Mode.NONE
                && (policy.cidrAllows(literal)
                    || (policy.mode() == EgressPolicy.Mode.ALL && isPublic.test(literal)));
        if (!ok) {
          throw denied(policy, host, null);
        }
        return new Target(literal.getHostAddress(), port, List.of(literal));
      }
      String lastLabel = host.substring(host.lastIndexOf('.') + 1);
      if (!HostNames.isValidHostName(host) || lastLabel.chars().allMatch(Character::isDigit)) {
        throw new Refusal(
            400,
            "sandbox4j egress proxy: '" + HttpWire.printable(rawHost) + "' is not a host name");
      }
      if (HostNames.isLocalhostName(host)) {
        // RFC 6761: these names are loopback whatever a resolver says (browsers and curl resolve
        // them so without asking); the port proxy's URLs are such names.
        throw neverOpened(host, InetAddress.getLoopbackAddress(), "a localhost name is loopback");
      }
      if (!policy.allowsName(host)) {
        throw denied(policy, host, null);
      }
      List<InetAddress> resolved;
      try {
        resolved = resolver.resolve(host);
      } catch (UnknownHostException e) {
        throw new Refusal(502, "sandbox4j egress proxy: cannot resolve " + host + ": no such host");
      } catch (RuntimeException e) {
        throw new Refusal(
            502, "sandbox4j egress proxy: cannot resolve " + host + ": " + e.getMessage());
      }
      List<InetAddress> ok = new ArrayList<>();
      InetAddress refused = null;
      Optional<String> closedWhy = Optional.empty();
      InetAddress closedAddress = null;
      for (InetAddress a : resolved) {
        Optional<String> closed = neverOpen.apply(a);
        if (closed.isPresent()) {
          if (closedAddress == null) {
            closedAddress = a;
            closedWhy = closed;
          }
        } else if (policy.cidrAllows(a) || isPublic.test(a)) {
          ok.add(a);
        } else if (refused == null) {
          refused = a;
        }
      }
      if (ok.isEmpty()) {
        if (closedAddress != null) {
          throw neverOpened(host, closedAddress, closedWhy.get());
        }
        if (refused == null) {
          throw new Refusal(502, "sandbox4j egress proxy: cannot resolve " + host + ": no address");
        }
        throw denied(policy, host, refused);
      }
      return new Target(host, port, List.copyOf(ok));
    }

    private Refusal neverOpened(String host, InetAddress address, String why) {
      String resolved = literal(host) != null ? "" : " (" + address.getHostAddress() + ")";
      return new Refusal(
          403, "sandbox4j egress proxy: no egress policy opens " + host + resolved + ": " + why);
    }

    private Refusal denied(EgressPolicy policy, String host, InetAddress nonPublic) {
      String why =
          nonPublic == null
              ? ""
              : ": it resolves to " + nonPublic.getHostAddress() + ", which is not public";
      return new Refusal(
          403,
          "sandbox4j egress policy denies "
              + host
              + why
              + " (allowed: "
              + policy.describeAllowed()
              + ")");
    }

    /** A TCP connection to the first of the target's addresses that answers. */
    private Socket open(Target target) throws IOException, Refusal {
      IOException last = null;
      for (InetAddress a : target.addresses()) {
        Socket s = new Socket();
        try {
          s.setTcpNoDelay(true);
          s.connect(new InetSocketAddress(a, target.port()), connectTimeout);
          return s;
        } catch (IOException e) {
          closeQuietly(s);
          last = e;
        }
      }
      throw new Refusal(
          502,
          "sandbox4j egress proxy: cannot connect to "
              + target.host()
              + ":"
              + target.port()
              + ": "
              + (last instanceof SocketTimeoutException
                  ? "timed out"
                  : String.valueOf(last.getMessage())));
    }

    private Socket openTls(Target target) throws IOException, Refusal {
      Socket plain = open(target);
      try {
        SSLSocket s =
            (SSLSocket)
                upstreamTrust.factory().createSocket(plain, target.host(), target.port(), true);
        SSLParameters p = s.getSSLParameters();
        p.setEndpointIdentificationAlgorithm("HTTPS");
        p.setApplicationProtocols(new String[] {"http/1.1"});
        if (literal(target.host()) == null) {
          p.setServerNames(List.of(new SNIHostName(target.host())));
        }
        s.setSSLParameters(p);
        plain.setSoTimeout(connectTimeout);
        s.startHandshake();
        return s;
      } catch (IOException | GeneralSecurityException e) {
        closeQuietly(plain);
        String why = e instanceof SocketTimeoutException ? "timed out" : e.getMessage();
        throw new Refusal(
            502, "sandbox4j egress proxy: TLS to " + target.host() + " failed: " + why);
      }
    }
  }

  // ---- helpers ----

  /** Copies {@code from} to {@code to} until EOF, then half-closes; stops when both idle out. */
  private void pump(Socket from, Socket to, AtomicLong last, byte[] buf) {
    try {
      InputStream in = from.getInputStream();
      OutputStream out = to.getOutputStream();
      int tick = Math.max(1_000, idleTimeout / 4);
      from.setSoTimeout(Math.min(tick, idleTimeout));
      long idleNanos = idleTimeout * 1_000_000L;
      while (true) {
        int r;
        try {
          r = in.read(buf);
        } catch (SocketTimeoutException e) {
          if (System.nanoTime() - last.get() > idleNanos) {
            closeQuietly(from);
            closeQuietly(to);
            return;
          }
          continue;
        }
        if (r < 0) {
          try {
            to.shutdownOutput();
          } catch (IOException e) {
            // already closed: nothing left to tell
          }
          return;
        }
        out.write(buf, 0, r);
        last.setOpaque(System.nanoTime());
      }
    } catch (IOException e) {
      closeQuietly(from);
      closeQuietly(to);
    }
  }

  private static String[] requestLine(HttpWire.Head head) throws HttpWire.Malformed {
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

  private static int statusOf(HttpWire.Head response) throws HttpWire.Malformed {
    String line = response.startLine();
    if (line.length() < 12
        || !line.startsWith("HTTP/1.")
        || line.charAt(8) != ' '
        || !Character.isDigit(line.charAt(9))
        || !Character.isDigit(line.charAt(10))
        || !Character.isDigit(line.charAt(11))) {
      throw new HttpWire.Malformed(502, "bad status line");
    }
    return Integer.parseInt(line.substring(9, 12));
  }

  private static void writeResponseHead(OutputStream out, HttpWire.Head response, boolean close)
      throws IOException {
    Set<String> drop = new HashSet<>(Set.of("connection", "keep-alive", "proxy-connection"));
    for (String v : response.all("Connection")) {
      for (String t : v.split(",")) {
        String name = t.strip().toLowerCase(Locale.ROOT);
        if (!name.equals("content-length") && !name.equals("transfer-encoding")) {
          drop.add(name);
        }
      }
    }
    StringBuilder b = new StringBuilder(512);
    b.append(response.startLine()).append("\r\n");
    for (String[] f : response.fields()) {
      if (!drop.contains(f[0].toLowerCase(Locale.ROOT))) {
        b.append(f[0]).append(": ").append(f[1]).append("\r\n");
      }
    }
    if (close) {
      b.append("Connection: close\r\n");
    }
    b.append("\r\n");
    out.write(b.toString().getBytes(StandardCharsets.ISO_8859_1));
  }

  /** Answers with a short plain-text body and {@code Connection: close}. */
  private static void respond(OutputStream out, int status, String message) {
    byte[] body = (message + "\n").getBytes(StandardCharsets.UTF_8);
    String head =
        "HTTP/1.1 "
            + status
            + " "
            + reason(status)
            + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
            + body.length
            + "\r\nConnection: close\r\n\r\n";
    try {
      out.write(head.getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
    } catch (IOException e) {
      // the client left: nobody to tell
    }
  }

  private static String reason(int status) {
    return switch (status) {
      case 400 -> "Bad Request";
      case 403 -> "Forbidden";
      case 421 -> "Misdirected Request";
      case 431 -> "Request Header Fields Too Large";
      case 500 -> "Internal Server Error";
      case 501 -> "Not Implemented";
      case 502 -> "Bad Gateway";
      case 503 -> "Service Unavailable";
      case 504 -> "Gateway Timeout";
      case 505 -> "HTTP Version Not Supported";
      default -> "Error";
    };
  }

  /**
   * Splits {@code host:port} ({@code [v6]:port}); {@code defaultPort} when the port is absent
   * ({@code -1}: required).
   */
  private static String[] splitAuthority(String authority, int defaultPort)
      throws HttpWire.Malformed {
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
  private static InetAddress literal(String host) {
    try {
      return InetAddress.ofLiteral(host);
    } catch (IllegalArgumentException e) {
      try {
        return java.net.Inet4Address.ofPosixLiteral(host);
      } catch (IllegalArgumentException notPosix) {
        return null;
      }
    }
  }

  private static boolean sameHost(String hostHeader, String target) {
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

  private static SSLContext upstreamContext(Path extraTrust)
      throws GeneralSecurityException, IOException {
    TrustManagerFactory jdk =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    jdk.init((KeyStore) null);
    X509TrustManager base = x509(jdk.getTrustManagers());
    X509TrustManager extra = null;
    if (extraTrust != null && Files.exists(extraTrust)) {
      KeyStore store = KeyStore.getInstance("PKCS12");
      store.load(null, null);
      int i = 0;
      try (InputStream pem = Files.newInputStream(extraTrust)) {
        for (var cert :
            java.security.cert.CertificateFactory.getInstance("X.509").generateCertificates(pem)) {
          store.setCertificateEntry("extra-" + i++, cert);
        }
      }
      TrustManagerFactory f =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      f.init(store);
      extra = x509(f.getTrustManagers());
    }
    X509TrustManager extraTm = extra;
    X509TrustManager both =
        extraTm == null
            ? base
            : new X509TrustManager() {
              @Override
              public void checkClientTrusted(X509Certificate[] chain, String authType)
                  throws CertificateException {
                throw new CertificateException("the egress proxy authenticates no clients");
              }

              @Override
              public void checkServerTrusted(X509Certificate[] chain, String authType)
                  throws CertificateException {
                try {
                  base.checkServerTrusted(chain, authType);
                } catch (CertificateException e) {
                  extraTm.checkServerTrusted(chain, authType);
                }
              }

              @Override
              public X509Certificate[] getAcceptedIssuers() {
                X509Certificate[] a = base.getAcceptedIssuers();
                X509Certificate[] b = extraTm.getAcceptedIssuers();
                X509Certificate[] out = java.util.Arrays.copyOf(a, a.length + b.length);
                System.arraycopy(b, 0, out, a.length, b.length);
                return out;
              }
            };
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, new TrustManager[] {both}, null);
    return context;
  }

  private static X509TrustManager x509(TrustManager[] managers) {
    for (TrustManager m : managers) {
      if (m instanceof X509TrustManager x) {
        return x;
      }
    }
    throw new IllegalStateException("no X509TrustManager");
  }

  private static void writeAscii(OutputStream out, String s) throws IOException {
    out.write(s.getBytes(StandardCharsets.US_ASCII));
  }

  private static int millis(Duration d) {
    return (int) Math.min(Integer.MAX_VALUE, Math.max(1, d.toMillis()));
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // closing on the way out: nothing to do about it
    }
  }
}
