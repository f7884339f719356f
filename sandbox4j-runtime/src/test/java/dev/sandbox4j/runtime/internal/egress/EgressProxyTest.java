package dev.sandbox4j.runtime.internal.egress;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyPair;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The egress proxy on loopback: "sandboxes" are clients bound to distinct source addresses
 * 127.0.0.x, the "internet" is servers on 127.0.1.x (which the proxy is told to count as public),
 * named in a hosts file the test writes. 127.0.0.1 stays non-public: the refusal path.
 */
class EgressProxyTest {
  @TempDir static Path home;

  static final InetAddress SANDBOX = addr("127.0.0.2");
  static final InetAddress OTHER_SANDBOX = addr("127.0.0.3");
  static final InetAddress STRANGER = addr("127.0.0.9");
  static final String SECRET = "Bearer s3cr3t-token";

  static final Map<InetAddress, EgressPolicy> policies = new ConcurrentHashMap<>();
  static final List<Map<String, List<String>>> seen = new CopyOnWriteArrayList<>();
  static final List<Map<String, List<String>>> seenTls = new CopyOnWriteArrayList<>();

  static final java.util.concurrent.CountDownLatch firstChunkSeen =
      new java.util.concurrent.CountDownLatch(1);
  static HttpServer api; // api.test, www.api.test, other.test: 127.0.1.1
  static HttpServer hostLocal; // rebind.test: 127.0.0.1, not public
  static HttpsServer secure; // secure.test: 127.0.1.2, its own CA
  static ServerSocket echo; // 127.0.1.1, raw bytes back
  static ProxyCa realWorldCa;
  static EgressProxy proxy;

  @BeforeAll
  static void start() throws Exception {
    api = HttpServer.create(new InetSocketAddress(addr("127.0.1.1"), 0), 50);
    api.createContext("/", ex -> record(ex, seen));
    api.createContext("/stream", EgressProxyTest::stream);
    api.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
    api.start();
    hostLocal = HttpServer.create(new InetSocketAddress(addr("127.0.0.1"), 0), 50);
    hostLocal.createContext("/", ex -> record(ex, seen));
    hostLocal.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
    hostLocal.start();

    realWorldCa = ProxyCa.loadOrCreate(home.resolve("real-world-ca"));
    KeyPair key = ProxyCa.newKeyPair();
    X509Certificate cert = realWorldCa.signLeaf("secure.test", Instant.now(), key);
    KeyStore ks = KeyStore.getInstance("PKCS12");
    ks.load(null, null);
    ks.setKeyEntry(
        "k",
        key.getPrivate(),
        new char[0],
        new X509Certificate[] {cert, realWorldCa.certificate()});
    KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(ks, new char[0]);
    SSLContext serverTls = SSLContext.getInstance("TLS");
    serverTls.init(kmf.getKeyManagers(), null, null);
    secure = HttpsServer.create(new InetSocketAddress(addr("127.0.1.2"), 0), 50);
    secure.setHttpsConfigurator(new HttpsConfigurator(serverTls));
    secure.createContext("/", ex -> record(ex, seenTls));
    secure.setExecutor(Executors.newVirtualThreadPerTaskExecutor());
    secure.start();
    Files.createDirectories(home.resolve("network"));
    // The home's extra upstream trust: the proxy verifies secure.test against it.
    Files.writeString(EgressProxy.upstreamTrustFile(home), realWorldCa.certificatePem());

    echo = new ServerSocket(0, 50, addr("127.0.1.1"));
    Thread.ofVirtual()
        .start(
            () -> {
              while (!echo.isClosed()) {
                try {
                  Socket s = echo.accept();
                  Thread.ofVirtual()
                      .start(
                          () -> {
                            try (s) {
                              s.getInputStream().transferTo(s.getOutputStream());
                            } catch (IOException e) {
                              // the test client left
                            }
                          });
                } catch (IOException e) {
                  return;
                }
              }
            });

    Files.createDirectories(home.resolve("network"));
    Files.writeString(
        EgressProxy.hostsFile(home),
        """
        # the test's fake internet
        127.0.1.1 api.test www.api.test other.test
        127.0.1.2 secure.test
        127.0.0.1 rebind.test
        """);
    proxy =
        EgressProxy.builder(source -> Optional.ofNullable(policies.get(source)))
            .home(home)
            .bind(addr("127.0.0.1"), 0)
            .alsoPublic("127.0.1.0/24")
            .headTimeout(Duration.ofSeconds(2))
            .tlsSniff(Duration.ofSeconds(20)) // a loaded machine must not turn TLS into a tunnel
            .start();
  }

  @AfterAll
  static void stop() throws IOException {
    proxy.close();
    api.stop(0);
    hostLocal.stop(0);
    secure.stop(0);
    echo.close();
  }

  @BeforeEach
  void reset() {
    policies.clear();
    seen.clear();
    seenTls.clear();
  }

  @Test
  void anAllowedDomainPasses() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));

    Response r = get(SANDBOX, "http://api.test:" + port(api) + "/hello?x=1");

    assertThat(r.status()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("GET /hello?x=1");
    assertThat(seen).hasSize(1);
    assertThat(seen.getFirst().get("Host")).containsExactly("api.test:" + port(api));
  }

  @Test
  void aWildcardAllowsSubdomainsButNotTheApex() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("*.api.test"));

    assertThat(get(SANDBOX, "http://WWW.api.test.:" + port(api) + "/").status()).isEqualTo(200);
    assertThat(get(SANDBOX, "http://api.test:" + port(api) + "/").status()).isEqualTo(403);
  }

  @Test
  void aDeniedDomainIsRefusedAtOnceWithAReason() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test", "198.51.100.0/24"));

    Response r = get(SANDBOX, "http://other.test:" + port(api) + "/");

    assertThat(r.status()).isEqualTo(403);
    assertThat(r.body())
        .isEqualTo(
            "sandbox4j egress policy denies other.test (allowed: api.test, 198.51.100.0/24)\n");
    assertThat(seen).isEmpty();
  }

  @Test
  void noneDeniesEverything() throws Exception {
    policies.put(SANDBOX, EgressPolicy.none());

    assertThat(get(SANDBOX, "http://api.test:" + port(api) + "/").status()).isEqualTo(403);
    assertThat(connect(SANDBOX, "api.test:" + echo.getLocalPort()).status).isEqualTo(403);
    assertThat(seen).isEmpty();
  }

  @Test
  void anIpLiteralNeedsACidrRule() throws Exception {
    String byIp = "http://127.0.1.1:" + port(api) + "/";
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    assertThat(get(SANDBOX, byIp).status()).isEqualTo(403);
    assertThat(get(SANDBOX, "http://0x7f.1.1:" + port(api) + "/").status()).isEqualTo(403);

    policies.put(SANDBOX, stored("127.0.1.0/24"));
    assertThat(get(SANDBOX, byIp).status()).isEqualTo(200);

    policies.put(SANDBOX, EgressPolicy.all());
    assertThat(get(SANDBOX, byIp).status()).isEqualTo(200);
    assertThat(get(SANDBOX, "http://127.0.0.1:" + port(hostLocal) + "/").status()).isEqualTo(403);
    assertThat(get(SANDBOX, "http://[::1]:" + port(hostLocal) + "/").status()).isEqualTo(403);
    assertThat(seen).hasSize(2);
  }

  @Test
  void connectToADeniedHostIsRefused() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));

    Tunnel t = connect(SANDBOX, "other.test:" + echo.getLocalPort());
    assertThat(t.status).isEqualTo(403);
    assertThat(t.head).contains("sandbox4j egress policy denies other.test");
    assertThat(connect(SANDBOX, "127.0.1.1:" + echo.getLocalPort()).status).isEqualTo(403);
  }

  @Test
  void aConnectTunnelCarriesBytesBothWays() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    byte[] data = new byte[1 << 20];
    new Random(7).nextBytes(data);

    Tunnel t = connect(SANDBOX, "api.test:" + echo.getLocalPort());
    assertThat(t.status).isEqualTo(200);
    try (Socket s = t.socket) {
      Thread writer =
          Thread.ofVirtual()
              .start(
                  () -> {
                    try {
                      s.getOutputStream().write(data);
                      s.shutdownOutput();
                    } catch (IOException e) {
                      throw new RuntimeException(e);
                    }
                  });
      byte[] back = s.getInputStream().readAllBytes();
      writer.join();
      assertThat(back).isEqualTo(data);
    }
  }

  @Test
  void aHeaderRuleIsSetOnPlainHttpReplacingTheClientsValue() throws Exception {
    policies.put(
        SANDBOX,
        EgressPolicy.allow("api.test", "other.test")
            .withHeader("api.test", "Authorization", SECRET, List.of(port(api))));

    Response r =
        request(
            SANDBOX,
            "GET http://api.test:"
                + port(api)
                + "/ HTTP/1.1\r\nHost: api.test\r\nauthorization: Bearer fake\r\n"
                + "Connection: close\r\n\r\n");
    assertThat(r.status()).isEqualTo(200);
    assertThat(seen.getFirst().get("Authorization")).containsExactly(SECRET);
    assertThat(r.raw()).doesNotContain("s3cr3t");

    get(SANDBOX, "http://other.test:" + port(api) + "/");
    assertThat(seen.get(1)).doesNotContainKey("Authorization");
  }

  @Test
  void aHeaderSecretReachesOnlyThePortsItsRuleNames() throws Exception {
    // By default a rule is for intercepted HTTPS on 443: cleartext to any port of the allowed
    // host, 80 and 8080 style alike, goes without the secret.
    policies.put(
        SANDBOX, EgressPolicy.allow("api.test").withHeader("api.test", "Authorization", SECRET));
    assertThat(get(SANDBOX, "http://api.test:" + port(api) + "/default").status()).isEqualTo(200);
    assertThat(seen.getLast()).as("cleartext, default rule").doesNotContainKey("Authorization");

    policies.put(
        SANDBOX,
        EgressPolicy.allow("api.test")
            .withHeader("api.test", "Authorization", SECRET, List.of(80, 8080)));
    assertThat(get(SANDBOX, "http://api.test:" + port(api) + "/other").status()).isEqualTo(200);
    assertThat(seen.getLast())
        .as("a port the rule does not list")
        .doesNotContainKey("Authorization");

    policies.put(
        SANDBOX,
        EgressPolicy.allow("api.test")
            .withHeader("api.test", "Authorization", SECRET, List.of(port(api))));
    assertThat(get(SANDBOX, "http://api.test:" + port(api) + "/listed").status()).isEqualTo(200);
    assertThat(seen.getLast().get("Authorization")).as("the listed port").containsExactly(SECRET);

    // Intercepted HTTPS to a port other than 443 is not covered by the default either.
    policies.put(
        SANDBOX,
        EgressPolicy.allow("secure.test")
            .withHeader("secure.test", "X-Key", SECRET)
            .withInterceptTls(true));
    X509Certificate proxyCa = ProxyCa.readCertificate(EgressProxy.caCertificatePem(home));
    Tunnel t = connect(SANDBOX, "secure.test:" + port(secure));
    SSLSocket tls = tls(t.socket, "secure.test", proxyCa);
    Response r =
        exchange(tls, "GET /not443 HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n");
    assertThat(r.status()).isEqualTo(200);
    assertThat(seenTls.getLast()).doesNotContainKey("X-key");
  }

  @Test
  void bodiesStreamBothWaysWithLengthAndChunks() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    String body = "x".repeat(100_000);

    Response fixed =
        request(
            SANDBOX,
            "POST http://api.test:"
                + port(api)
                + "/echo HTTP/1.1\r\nContent-Length: "
                + body.length()
                + "\r\nConnection: close\r\n\r\n"
                + body);
    assertThat(fixed.status()).isEqualTo(200);
    assertThat(fixed.body()).isEqualTo("POST /echo " + body);

    Response chunked =
        request(
            SANDBOX,
            "POST http://api.test:"
                + port(api)
                + "/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
    assertThat(chunked.status()).isEqualTo(200);
    assertThat(chunked.body()).isEqualTo("POST /echo hello world");
  }

  @Test
  void aStreamedResponseReachesTheClientAsItComes() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    try (Socket s = client(SANDBOX)) {
      s.getOutputStream()
          .write(
              ("GET http://api.test:" + port(api) + "/stream HTTP/1.1\r\nConnection: close\r\n\r\n")
                  .getBytes());
      InputStream in = s.getInputStream();
      assertThat(readLine(in)).isEqualTo("HTTP/1.1 200 OK");
      while (!readLine(in).isEmpty()) {
        // headers
      }
      // The server sends "second" only once the client has "first": a proxy that held the first
      // chunk back until more came would make it send "late" instead, 30 s on.
      int size = Integer.parseInt(readLine(in), 16);
      assertThat(new String(in.readNBytes(size))).isEqualTo("first\n");
      firstChunkSeen.countDown();
      readLine(in);
      size = Integer.parseInt(readLine(in), 16);

      assertThat(new String(in.readNBytes(size))).isEqualTo("second\n");
    }
  }

  @Test
  void smugglingShapedRequestsAreRefused() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    String target = "POST http://api.test:" + port(api) + "/ HTTP/1.1\r\n";

    assertThat(
            request(
                    SANDBOX,
                    target + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
                .status())
        .isEqualTo(400);
    assertThat(
            request(SANDBOX, target + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
                .status())
        .isEqualTo(400);
    assertThat(request(SANDBOX, target + "X: a\r\n folded\r\n\r\n").status()).isEqualTo(400);
    assertThat(seen).isEmpty();
  }

  @Test
  void httpsThroughConnectIsOpaqueWithoutInterception() throws Exception {
    policies.put(
        SANDBOX, EgressPolicy.allow("secure.test").withHeader("secure.test", "X-Key", SECRET));

    Tunnel t = connect(SANDBOX, "secure.test:" + port(secure));
    assertThat(t.status).isEqualTo(200);
    SSLSocket tls = tls(t.socket, "secure.test", realWorldCa.certificate());
    Response r =
        exchange(tls, "GET /plain HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n");

    assertThat(r.status()).isEqualTo(200);
    assertThat(seenTls.getFirst()).doesNotContainKey("X-key");
    assertThat(issuer(tls)).isEqualTo(realWorldCa.certificate().getSubjectX500Principal());
  }

  @Test
  void interceptedHttpsGetsTheHeaderAndTheRealServerIsVerified() throws Exception {
    policies.put(
        SANDBOX,
        EgressPolicy.allow("secure.test")
            .withHeader("secure.test", "X-Key", SECRET, List.of(port(secure)))
            .withInterceptTls(true));
    X509Certificate proxyCa = ProxyCa.readCertificate(EgressProxy.caCertificatePem(home));

    Tunnel t = connect(SANDBOX, "secure.test:" + port(secure));
    assertThat(t.status).isEqualTo(200);
    SSLSocket tls = tls(t.socket, "secure.test", proxyCa);
    Response r =
        exchange(
            tls,
            "GET /in HTTP/1.1\r\nHost: secure.test:"
                + port(secure)
                + "\r\nX-Key: mine\r\nConnection: close\r\n\r\n");

    assertThat(r.status()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("GET /in");
    assertThat(seenTls.getFirst().get("X-key")).containsExactly(SECRET);
    assertThat(issuer(tls)).isEqualTo(proxyCa.getSubjectX500Principal());
    assertThat(Files.getPosixFilePermissions(EgressProxy.caDirectory(home).resolve("ca.key")))
        .containsExactlyInAnyOrder(
            java.nio.file.attribute.PosixFilePermission.OWNER_READ,
            java.nio.file.attribute.PosixFilePermission.OWNER_WRITE);
  }

  @Test
  void underInterceptionATunnelThatDoesNotStartWithTlsStaysOpaque() throws Exception {
    policies.put(
        SANDBOX,
        EgressPolicy.allow("api.test")
            .withHeader("api.test", "X-Key", SECRET)
            .withInterceptTls(true));

    Tunnel t = connect(SANDBOX, "api.test:" + echo.getLocalPort());
    try (Socket s = t.socket) {
      s.getOutputStream().write("plain bytes, not TLS".getBytes());
      s.shutdownOutput();

      assertThat(new String(s.getInputStream().readAllBytes())).isEqualTo("plain bytes, not TLS");
    }
  }

  @Test
  void theJdksHttpClientWorksThroughTheProxyForHttpAndInterceptedHttps() throws Exception {
    policies.put(
        SANDBOX,
        EgressPolicy.allow("api.test", "secure.test")
            .withHeader("*.test", "X-Key", SECRET, List.of(port(api), port(secure)))
            .withInterceptTls(true));
    X509Certificate proxyCa = ProxyCa.readCertificate(EgressProxy.caCertificatePem(home));
    try (java.net.http.HttpClient http =
        java.net.http.HttpClient.newBuilder()
            .proxy(java.net.ProxySelector.of(proxy.address()))
            .localAddress(SANDBOX)
            .sslContext(clientContext(proxyCa))
            .build()) {
      var plain =
          http.send(
              java.net.http.HttpRequest.newBuilder(
                      java.net.URI.create("http://api.test:" + port(api) + "/a"))
                  .POST(java.net.http.HttpRequest.BodyPublishers.ofString("body"))
                  .build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
      var tls =
          http.send(
              java.net.http.HttpRequest.newBuilder(
                      java.net.URI.create("https://secure.test:" + port(secure) + "/b"))
                  .build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
      var denied =
          http.send(
              java.net.http.HttpRequest.newBuilder(
                      java.net.URI.create("http://other.test:" + port(api) + "/c"))
                  .build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());

      assertThat(plain.statusCode()).isEqualTo(200);
      assertThat(plain.body()).isEqualTo("POST /a body");
      assertThat(seen.getFirst().get("X-key")).containsExactly(SECRET);
      assertThat(tls.statusCode()).isEqualTo(200);
      assertThat(tls.body()).isEqualTo("GET /b");
      assertThat(seenTls.getFirst().get("X-key")).containsExactly(SECRET);
      assertThat(denied.statusCode()).isEqualTo(403);
      assertThat(denied.body()).startsWith("sandbox4j egress policy denies other.test");
    }
  }

  @Test
  void interceptionRefusesAServerItCannotVerify() throws Exception {
    // The echo server sends the proxy's ClientHello back: the TLS handshake upstream fails.
    policies.put(SANDBOX, EgressPolicy.allow("api.test").withInterceptTls(true));
    X509Certificate proxyCa = ProxyCa.readCertificate(EgressProxy.caCertificatePem(home));

    Tunnel t = connect(SANDBOX, "api.test:" + echo.getLocalPort());
    SSLSocket tls = tls(t.socket, "api.test", proxyCa);
    Response r = exchange(tls, "GET / HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n");

    assertThat(r.status()).isEqualTo(502);
    assertThat(r.body()).contains("TLS to api.test failed");
  }

  @Test
  void aNameResolvingToTheHostsLoopbackIsRefusedWhateverThePolicySays() throws Exception {
    String url = "http://rebind.test:" + port(hostLocal) + "/";
    policies.put(SANDBOX, EgressPolicy.allow("rebind.test"));
    Response r = get(SANDBOX, url);
    assertThat(r.status()).isEqualTo(403);
    assertThat(r.body())
        .contains("no egress policy opens rebind.test (127.0.0.1): it is in 127.0.0.0/8 (loopback");

    policies.put(SANDBOX, EgressPolicy.all());
    assertThat(get(SANDBOX, url).status()).isEqualTo(403);
    assertThat(seen).isEmpty();

    // Not even a CIDR rule opens the host's loopback: the API refuses one, and one stored on disk
    // before that (read back leniently) is refused where the proxy decides.
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> EgressPolicy.allow("rebind.test", "127.0.0.1/32"))
        .hasMessageContaining("127.0.0.0/8 (loopback");
    for (String rule : List.of("127.0.0.1/32", "127.0.0.0/8", "0.0.0.0/0", "::/0")) {
      policies.put(SANDBOX, stored("rebind.test", rule));
      Response loop = get(SANDBOX, url);
      assertThat(loop.status()).as(rule).isEqualTo(403);
      assertThat(loop.body())
          .as(rule)
          .contains("no egress policy opens rebind.test (127.0.0.1): it is in 127.0.0.0/8");
    }
    assertThat(seen).isEmpty();
  }

  /** An allowlist as stored on disk: read leniently, so it may hold CIDRs the API refuses. */
  static EgressPolicy stored(String... rules) {
    StringBuilder json = new StringBuilder("{\"mode\":\"allowlist\",\"allow\":[");
    for (int i = 0; i < rules.length; i++) {
      json.append(i == 0 ? "" : ",").append('"').append(rules[i]).append('"');
    }
    return EgressPolicy.fromJson(json.append("]}").toString());
  }

  @Test
  void anUnknownNameIsABadGateway() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());

    Response r = get(SANDBOX, "http://no-such-host.invalid/");

    assertThat(r.status()).isEqualTo(502);
    assertThat(r.body()).contains("cannot resolve no-such-host.invalid");
  }

  @Test
  void aServerThatIsNotThereIsABadGatewayForHttpAndConnect() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    int closedPort;
    try (ServerSocket gone = new ServerSocket(0, 1, addr("127.0.1.1"))) {
      closedPort = gone.getLocalPort();
    }

    Response r = get(SANDBOX, "http://api.test:" + closedPort + "/");
    Tunnel t = connect(SANDBOX, "api.test:" + closedPort);

    assertThat(r.status()).isEqualTo(502);
    assertThat(r.body())
        .startsWith("sandbox4j egress proxy: cannot connect to api.test:" + closedPort);
    assertThat(t.status).isEqualTo(502);
  }

  @Test
  void aFailingPolicyLookupIsAServerErrorNotAPass() throws Exception {
    try (EgressProxy broken =
        EgressProxy.builder(
                source -> {
                  throw new IllegalStateException("policy file unreadable");
                })
            .home(home)
            .bind(addr("127.0.0.1"), 0)
            .alsoPublic("127.0.1.0/24")
            .start()) {
      try (Socket s = client(SANDBOX, broken)) {
        Response r =
            exchange(
                s, "GET http://api.test:" + port(api) + "/ HTTP/1.1\r\nConnection: close\r\n\r\n");

        assertThat(r.status()).isEqualTo(500);
        assertThat(r.body()).contains("policy file unreadable");
      }
    }
    assertThat(seen).isEmpty();
  }

  @Test
  void closingTheProxyEndsItsTunnels() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());
    EgressProxy closing =
        EgressProxy.builder(source -> Optional.ofNullable(policies.get(source)))
            .home(home)
            .bind(addr("127.0.0.1"), 0)
            .alsoPublic("127.0.1.0/24")
            .start();
    Tunnel t = connect(SANDBOX, "api.test:" + echo.getLocalPort(), closing);
    try (Socket s = t.socket) {
      s.getOutputStream().write("x".getBytes());
      assertThat(s.getInputStream().read()).isEqualTo('x');

      closing.close();

      s.setSoTimeout(60_000);
      int next;
      try {
        next = s.getInputStream().read();
      } catch (java.net.SocketException reset) {
        next = -1;
      }
      assertThat(next).isEqualTo(-1);
    }
  }

  @Test
  void anUnknownSourceIsRefused() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());

    Response r = get(STRANGER, "http://api.test:" + port(api) + "/");

    assertThat(r.status()).isEqualTo(403);
    assertThat(r.body()).contains("127.0.0.9 is not a sandbox");
    assertThat(seen).isEmpty();
  }

  @Test
  void eachSourceGetsItsOwnPolicy() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    policies.put(OTHER_SANDBOX, EgressPolicy.allow("other.test"));

    assertThat(get(SANDBOX, "http://api.test:" + port(api) + "/").status()).isEqualTo(200);
    assertThat(get(OTHER_SANDBOX, "http://api.test:" + port(api) + "/").status()).isEqualTo(403);
  }

  @Test
  void anOversizedHeadIsRefused() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());

    Response big =
        request(
            SANDBOX,
            "GET http://api.test:"
                + port(api)
                + "/ HTTP/1.1\r\nX-Big: "
                + "a".repeat(HttpWire.MAX_HEAD_BYTES)
                + "\r\n\r\n");
    StringBuilder many = new StringBuilder("GET http://api.test:" + port(api) + "/ HTTP/1.1\r\n");
    for (int i = 0; i <= HttpWire.MAX_HEADERS; i++) {
      many.append("X-").append(i).append(": v\r\n");
    }
    Response tooMany = request(SANDBOX, many.append("\r\n").toString());

    assertThat(big.status()).isEqualTo(431);
    assertThat(tooMany.status()).isEqualTo(431);
    assertThat(seen).isEmpty();
  }

  @Test
  void aClientTooSlowToSendItsHeadIsDropped() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());
    try (Socket s = client(SANDBOX)) {
      s.getOutputStream().write("GET http://api.test/ HTTP/1.1\r\nX-Slow: ".getBytes());
      s.setSoTimeout(60_000);
      // The proxy's head timeout (2 s here) ends the connection; the client sees EOF.
      assertThat(s.getInputStream().read()).isEqualTo(-1);
    }
    assertThat(seen).isEmpty();
  }

  @Test
  void aPolicyChangeAppliesToTheNextRequestOnTheSameConnection() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("api.test"));
    String req = "GET http://api.test:" + port(api) + "/ HTTP/1.1\r\nHost: api.test\r\n\r\n";
    try (Socket s = client(SANDBOX)) {
      s.getOutputStream().write(req.getBytes());
      assertThat(readResponse(s.getInputStream()).status()).isEqualTo(200);

      policies.put(SANDBOX, EgressPolicy.allow("other.test"));
      s.getOutputStream().write(req.getBytes());
      Response second = readResponse(s.getInputStream());

      assertThat(second.status()).isEqualTo(403);
      assertThat(second.body()).contains("denies api.test (allowed: other.test)");
    }
  }

  @Test
  void connectionsBeyondTheClientsShareAreRefused() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());
    try (EgressProxy small =
            EgressProxy.builder(source -> Optional.ofNullable(policies.get(source)))
                .home(home)
                .bind(addr("127.0.0.1"), 0)
                .alsoPublic("127.0.1.0/24")
                .maxConnections(10, 2, 1)
                .start();
        Socket idle1 = client(SANDBOX, small);
        Socket idle2 = client(SANDBOX, small)) {
      // Two connections that sent nothing yet hold the client's share; the proxy has them both
      // once a third, from another source, is served.
      policies.put(OTHER_SANDBOX, EgressPolicy.all());
      try (Socket other = client(OTHER_SANDBOX, small)) {
        assertThat(
                exchange(
                        other,
                        "GET http://api.test:"
                            + port(api)
                            + "/ HTTP/1.1\r\n"
                            + "Connection: close\r\n\r\n")
                    .status())
            .isEqualTo(200);
      }
      try (Socket third = client(SANDBOX, small)) {
        Response r = readResponse(third.getInputStream());

        assertThat(r.status()).isEqualTo(503);
        assertThat(r.body()).contains("too many open connections from 127.0.0.2");
      }
    }
  }

  /** Opens tunnels from {@code source} to the echo server until the proxy refuses one. */
  static List<Socket> floodUntilRefused(InetAddress source, EgressProxy to, List<String> refusals)
      throws IOException {
    List<Socket> held = new java.util.ArrayList<>();
    for (int i = 0; i < 2_000; i++) {
      Tunnel t = connect(source, "127.0.1.1:" + echo.getLocalPort(), to);
      if (t.status != 200) {
        refusals.add(t.status + " " + t.head);
        return held;
      }
      held.add(t.socket);
    }
    throw new AssertionError(source + " opened 2000 tunnels without a refusal");
  }

  @Test
  void fourFloodingSandboxesCannotStarveAFifthAndHearWhy() throws Exception {
    // The production limits: every flooder holds all the tunnels it can get.
    List<InetAddress> flooders =
        List.of(addr("127.0.0.4"), addr("127.0.0.5"), addr("127.0.0.6"), addr("127.0.0.7"));
    flooders.forEach(f -> policies.put(f, EgressPolicy.all()));
    policies.put(OTHER_SANDBOX, EgressPolicy.all());
    List<Socket> held = new java.util.ArrayList<>();
    List<String> refusals = new java.util.ArrayList<>();
    try {
      for (InetAddress f : flooders) {
        held.addAll(floodUntilRefused(f, proxy, refusals));
      }
      Response victim = get(OTHER_SANDBOX, "http://api.test:" + port(api) + "/still");
      assertThat(victim.status()).as(victim.body()).isEqualTo(200);
      assertThat(victim.body()).isEqualTo("GET /still");

      assertThat(refusals).hasSize(4);
      assertThat(refusals.getFirst())
          .startsWith("503")
          .contains("too many open connections from 127.0.0.4 (64 at once per sandbox)");
    } finally {
      for (Socket s : held) {
        s.close();
      }
    }
  }

  @Test
  void whenTheSharedPoolIsGoneEachSandboxStillGetsItsReservedConnections() throws Exception {
    InetAddress third = addr("127.0.0.8");
    for (InetAddress s : List.of(SANDBOX, OTHER_SANDBOX, third, STRANGER)) {
      policies.put(s, EgressPolicy.all());
    }
    List<Socket> held = new java.util.ArrayList<>();
    List<String> refusals = new java.util.ArrayList<>();
    try (EgressProxy small =
        EgressProxy.builder(source -> Optional.ofNullable(policies.get(source)))
            .home(home)
            .bind(addr("127.0.0.1"), 0)
            .alsoPublic("127.0.1.0/24")
            .maxConnections(4, 3, 1)
            .start()) {
      held.addAll(floodUntilRefused(SANDBOX, small, refusals)); // 1 reserved + 2 shared
      held.addAll(floodUntilRefused(OTHER_SANDBOX, small, refusals)); // 1 + the last 2 shared
      held.addAll(floodUntilRefused(third, small, refusals)); // its reserved one only
      assertThat(held).hasSize(7);
      assertThat(refusals.get(0)).contains("(3 at once per sandbox)");
      assertThat(refusals.get(2))
          .startsWith("503")
          .contains("too many open connections from 127.0.0.8 while the proxy is busy")
          .contains("each sandbox keeps 1 of its own");
      Tunnel last = connect(STRANGER, "127.0.1.1:" + echo.getLocalPort(), small);
      held.add(last.socket);
      assertThat(last.status).as("a fourth sandbox gets its reserved connection").isEqualTo(200);
    } finally {
      for (Socket s : held) {
        s.close();
      }
    }
  }

  @Test
  void anIdleTunnelIsClosed() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());
    try (EgressProxy quick =
        EgressProxy.builder(source -> Optional.ofNullable(policies.get(source)))
            .home(home)
            .bind(addr("127.0.0.1"), 0)
            .alsoPublic("127.0.1.0/24")
            .idleTimeout(Duration.ofSeconds(1))
            .start()) {
      Tunnel t = connect(SANDBOX, "api.test:" + echo.getLocalPort(), quick);
      assertThat(t.status).isEqualTo(200);
      try (Socket s = t.socket) {
        s.getOutputStream().write("ping".getBytes());
        assertThat(s.getInputStream().readNBytes(4)).isEqualTo("ping".getBytes());
        // Nothing more either way: the proxy ends the tunnel; without it this read times out.
        s.setSoTimeout(60_000);
        assertThat(s.getInputStream().read()).isEqualTo(-1);
      }
    }
  }

  @Test
  void garbageNeverReachesAServerNorStopsTheProxy() throws Exception {
    policies.put(SANDBOX, EgressPolicy.allow("other.test"));
    Random random = new Random(42);
    String[] prefixes = {
      "",
      "GET ",
      "GET http://api.test:" + port(api) + "/ HTTP/1.1\r\n",
      "CONNECT api.test:",
      "POST http://api.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    };
    for (int i = 0; i < 200; i++) {
      byte[] junk = new byte[random.nextInt(300)];
      random.nextBytes(junk);
      try (Socket s = client(SANDBOX)) {
        s.getOutputStream().write(prefixes[i % prefixes.length].getBytes());
        s.getOutputStream().write(junk);
        s.shutdownOutput();
        String first = readLine(s.getInputStream());
        // An answer is an error status; no answer is a closed connection.
        if (!first.isEmpty()) {
          assertThat(first).as("answer to garbage #%d", i).matches("HTTP/1\\.1 [45]\\d\\d .*");
        }
      } catch (java.net.SocketException e) {
        // the proxy reset a connection it gave up on: also an answer
      }
    }

    assertThat(seen).isEmpty();
    assertThat(get(SANDBOX, "http://other.test:" + port(api) + "/").status()).isEqualTo(200);
  }

  @Test
  void originFormRequestsAreToldToUseTheProxyAsAProxy() throws Exception {
    policies.put(SANDBOX, EgressPolicy.all());

    Response r = request(SANDBOX, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n");

    assertThat(r.status()).isEqualTo(400);
    assertThat(r.body()).contains("absolute-form");
  }

  // ---- fixtures ----

  record Response(int status, String head, String body, String raw) {}

  static final class Tunnel {
    int status;
    String head;
    Socket socket;
  }

  static void record(HttpExchange ex, List<Map<String, List<String>>> into) throws IOException {
    into.add(Map.copyOf(ex.getRequestHeaders()));
    byte[] in = ex.getRequestBody().readAllBytes();
    String uri = ex.getRequestURI().toString();
    byte[] out =
        (ex.getRequestMethod() + " " + uri + (in.length > 0 ? " " + new String(in) : ""))
            .getBytes(StandardCharsets.UTF_8);
    // Length 0 makes the server answer chunked: both framings reach the client.
    ex.sendResponseHeaders(200, uri.contains("echo") ? 0 : out.length);
    try (OutputStream o = ex.getResponseBody()) {
      o.write(out);
    }
  }

  static void stream(HttpExchange ex) throws IOException {
    ex.sendResponseHeaders(200, 0);
    try (OutputStream o = ex.getResponseBody()) {
      o.write("first\n".getBytes());
      o.flush();
      boolean seen;
      try {
        seen = firstChunkSeen.await(30, java.util.concurrent.TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        seen = false;
      }
      o.write((seen ? "second\n" : "late\n").getBytes());
    }
  }

  static Socket client(InetAddress source) throws IOException {
    return client(source, proxy);
  }

  static Socket client(InetAddress source, EgressProxy to) throws IOException {
    Socket s = new Socket();
    s.bind(new InetSocketAddress(source, 0));
    s.connect(to.address(), 5_000);
    s.setSoTimeout(30_000);
    return s;
  }

  static Response get(InetAddress source, String url) throws IOException {
    return request(source, "GET " + url + " HTTP/1.1\r\nConnection: close\r\n\r\n");
  }

  static Response request(InetAddress source, String raw) throws IOException {
    try (Socket s = client(source)) {
      return exchange(s, raw);
    }
  }

  static Response exchange(Socket s, String raw) throws IOException {
    try {
      s.getOutputStream().write(raw.getBytes(StandardCharsets.ISO_8859_1));
      s.getOutputStream().flush();
    } catch (IOException e) {
      // the proxy may refuse before reading all: its answer is still there
    }
    return readResponse(s.getInputStream());
  }

  /** One response, framed by Content-Length, chunks or the end of the stream. */
  static Response readResponse(InputStream in) throws IOException {
    String head = readLine(in);
    StringBuilder all = new StringBuilder(head).append("\r\n");
    long length = -1;
    boolean chunked = false;
    String line;
    while (!(line = readLine(in)).isEmpty()) {
      all.append(line).append("\r\n");
      String lower = line.toLowerCase();
      if (lower.startsWith("content-length:")) {
        length = Long.parseLong(line.substring(15).strip());
      }
      if (lower.startsWith("transfer-encoding:") && lower.contains("chunked")) {
        chunked = true;
      }
    }
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    if (chunked) {
      while (true) {
        int n = Integer.parseInt(readLine(in).split(";")[0].strip(), 16);
        if (n == 0) {
          readLine(in);
          break;
        }
        body.write(in.readNBytes(n));
        readLine(in);
      }
    } else if (length >= 0) {
      body.write(in.readNBytes((int) length));
    } else {
      in.transferTo(body);
    }
    String b = body.toString(StandardCharsets.UTF_8);
    return new Response(Integer.parseInt(head.split(" ")[1]), all.toString(), b, all + b);
  }

  static String readLine(InputStream in) throws IOException {
    StringBuilder b = new StringBuilder();
    int c;
    while ((c = in.read()) != -1 && c != '\n') {
      if (c != '\r') {
        b.append((char) c);
      }
    }
    return b.toString();
  }

  static Tunnel connect(InetAddress source, String authority) throws IOException {
    return connect(source, authority, proxy);
  }

  static Tunnel connect(InetAddress source, String authority, EgressProxy to) throws IOException {
    Socket s = client(source, to);
    s.getOutputStream()
        .write(
            ("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n").getBytes());
    Tunnel t = new Tunnel();
    String status = readLine(s.getInputStream());
    StringBuilder head = new StringBuilder(status);
    String line;
    while (!(line = readLine(s.getInputStream())).isEmpty()) {
      head.append('\n').append(line);
    }
    t.status = Integer.parseInt(status.split(" ")[1]);
    if (t.status != 200) {
      head.append('\n').append(new String(s.getInputStream().readAllBytes()));
      s.close();
    }
    t.head = head.toString();
    t.socket = s;
    return t;
  }

  static SSLSocket tls(Socket plain, String host, X509Certificate trusted) throws Exception {
    SSLSocket s =
        (SSLSocket) clientContext(trusted).getSocketFactory().createSocket(plain, host, 443, true);
    SSLParameters p = s.getSSLParameters();
    p.setEndpointIdentificationAlgorithm("HTTPS");
    s.setSSLParameters(p);
    s.startHandshake();
    return s;
  }

  static SSLContext clientContext(X509Certificate trusted) throws Exception {
    KeyStore ts = KeyStore.getInstance("PKCS12");
    ts.load(null, null);
    ts.setCertificateEntry("ca", trusted);
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(ts);
    SSLContext c = SSLContext.getInstance("TLS");
    c.init(null, tmf.getTrustManagers(), null);
    return c;
  }

  static javax.security.auth.x500.X500Principal issuer(SSLSocket s) throws Exception {
    return ((X509Certificate) s.getSession().getPeerCertificates()[0]).getIssuerX500Principal();
  }

  static int port(HttpServer server) {
    return server.getAddress().getPort();
  }

  static InetAddress addr(String literal) {
    return InetAddress.ofLiteral(literal);
  }
}
