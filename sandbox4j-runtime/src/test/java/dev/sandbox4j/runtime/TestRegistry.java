package dev.sandbox4j.runtime;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bouncycastle.crypto.generators.OpenBSDBCrypt;

/**
 * A real OCI Distribution registry on loopback for tests: Debian's {@code docker-registry} (the
 * CNCF distribution registry 2.8), started as a child process with its own configuration and
 * storage in a test's directory, anonymous or behind HTTP Basic or bearer-token auth. Images are
 * put into it with {@code skopeo}, a client independent of ours, so that what our client reads is
 * what a registry really serves.
 */
public final class TestRegistry implements AutoCloseable {
  /** How the registry authenticates its clients. */
  public enum Auth {
    /** No authentication: everyone may pull and push. */
    ANONYMOUS,
    /** HTTP Basic against an htpasswd file. */
    BASIC,
    /**
     * Docker's token auth: the registry answers 401 with {@code WWW-Authenticate: Bearer realm=...}
     * and accepts JWTs that a token server, run here in the test JVM, issues for Basic credentials.
     */
    TOKEN
  }

  /** The {@code service} the registry names in its challenges and requires as tokens' audience. */
  public static final String TOKEN_SERVICE = "sandbox4j-test-registry";

  private static final String TOKEN_ISSUER = "sandbox4j-test-token-issuer";
  private static final String USER = "tester";
  private static final String PASSWORD = "correct horse battery staple";
  private static final Duration START_TIMEOUT = Duration.ofSeconds(30);
  private static final Duration TOKEN_LIFETIME = Duration.ofMinutes(10);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Process registry;
  private final Path log;
  private final int port;
  private final Auth auth;
  private final HttpServer tokenServer;

  private TestRegistry(Process registry, Path log, int port, Auth auth, HttpServer tokenServer) {
    this.registry = registry;
    this.log = log;
    this.port = port;
    this.auth = auth;
    this.tokenServer = tokenServer;
  }

  /**
   * The registry, skopeo, openssl (for the token server's key) and zstd (for {@link
   * RegistryImages#zstdLayer}): skips a test on a machine without them, fails under CI.
   */
  public static void requireRegistry() {
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/docker-registry")),
        "the distribution registry (apt-get install docker-registry)");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/skopeo")), "skopeo (apt-get install skopeo)");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/openssl")), "openssl (apt-get install openssl)");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/zstd")), "zstd (apt-get install zstd)");
  }

  /**
   * Starts a registry whose configuration, storage and log live in {@code dir}, listening on a free
   * loopback port, and returns once it answers {@code GET /v2/}. Fails with the tail of its log if
   * it does not.
   */
  public static TestRegistry start(Path dir, Auth auth) throws IOException, InterruptedException {
    Files.createDirectories(dir);
    HttpServer tokenServer = auth == Auth.TOKEN ? startTokenServer(dir) : null;
    try {
      // The free port is found by binding and releasing it, so another process may take it before
      // the registry binds it: that start fails with "address already in use", and is retried.
      for (int attempt = 1; ; attempt++) {
        int port = freePort();
        Path config = writeConfig(dir, port, auth, tokenServer);
        Path log = dir.resolve("registry.log");
        Process process =
            new ProcessBuilder("/usr/bin/docker-registry", "serve", config.toString())
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
        TestRegistry registry = new TestRegistry(process, log, port, auth, tokenServer);
        if (registry.awaitReady()) {
          return registry;
        }
        process.destroyForcibly().waitFor();
        String tail = registry.logTail();
        if (attempt < 3 && tail.contains("address already in use")) {
          continue;
        }
        throw new IOException("the registry did not answer GET /v2/; its log ends with:\n" + tail);
      }
    } catch (IOException | InterruptedException | RuntimeException e) {
      if (tokenServer != null) {
        tokenServer.stop(0);
      }
      throw e;
    }
  }

  /** {@code 127.0.0.1:PORT}, the registry's host as image references name it. */
  public String host() {
    return "127.0.0.1:" + port;
  }

  /** {@code http://127.0.0.1:PORT/}. */
  public URI baseUri() {
    return URI.create("http://" + host() + "/");
  }

  public Auth auth() {
    return auth;
  }

  /** The user name that BASIC and TOKEN registries accept. */
  public String user() {
    return USER;
  }

  /** The password of {@link #user()}. */
  public String password() {
    return PASSWORD;
  }

  /**
   * Pushes the image (or, with every platform, the image index) of the OCI layout {@code ociLayout}
   * to {@code reference} ({@code repo:tag}) with skopeo; fails with skopeo's output. The layout's
   * index.json must name exactly one manifest or index. Without {@code skopeoExtraArgs}, skopeo
   * must push the layout's blobs and manifests unchanged ({@code --preserve-digests}), so that the
   * digests {@link RegistryImages} reports are the registry's; extra arguments such as {@code
   * --dest-compress-format zstd} may change them.
   */
  public void push(Path ociLayout, String reference, String... skopeoExtraArgs)
      throws IOException, InterruptedException {
    List<String> argv = new ArrayList<>(skopeo("copy"));
    argv.add("--dest-tls-verify=false");
    if (auth != Auth.ANONYMOUS) {
      argv.add("--dest-creds=" + USER + ":" + PASSWORD);
    }
    if (holdsIndex(ociLayout)) {
      argv.add("--all");
    }
    if (skopeoExtraArgs.length == 0) {
      argv.add("--preserve-digests");
    }
    argv.addAll(List.of(skopeoExtraArgs));
    argv.add("oci:" + ociLayout);
    argv.add("docker://" + host() + "/" + reference);
    TestImages.run(argv);
  }

  /** The raw manifest (or index) that {@code repoAndTag} names, as skopeo reads it. */
  public byte[] rawManifest(String repoAndTag) throws IOException, InterruptedException {
    List<String> argv = new ArrayList<>(skopeo("inspect"));
    argv.add("--raw");
    argv.add("--tls-verify=false");
    if (auth != Auth.ANONYMOUS) {
      argv.add("--creds=" + USER + ":" + PASSWORD);
    }
    argv.add("docker://" + host() + "/" + repoAndTag);
    return stdout(argv);
  }

  /** What {@code argv} writes to stdout; fails with its stderr unless it exits 0. */
  private static byte[] stdout(List<String> argv) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(argv).redirectError(ProcessBuilder.Redirect.PIPE).start();
    byte[] out = p.getInputStream().readAllBytes();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) {
      throw new IOException(String.join(" ", argv) + " failed: " + err);
    }
    return out;
  }

  /** The raw image config of the image {@code repoAndTag} names, as skopeo reads it. */
  public byte[] rawConfig(String repoAndTag) throws IOException, InterruptedException {
    List<String> argv = new ArrayList<>(skopeo("inspect"));
    argv.add("--config");
    argv.add("--raw");
    argv.add("--tls-verify=false");
    if (auth != Auth.ANONYMOUS) {
      argv.add("--creds=" + USER + ":" + PASSWORD);
    }
    argv.add("docker://" + host() + "/" + repoAndTag);
    return stdout(argv);
  }

  /**
   * Copies the image {@code repoAndTag} names into a new OCI layout {@code dir} with skopeo, which
   * checks every blob against its digest on the way.
   */
  public void copyToLayout(String repoAndTag, Path dir) throws IOException, InterruptedException {
    List<String> argv = new ArrayList<>(skopeo("copy"));
    argv.add("--src-tls-verify=false");
    if (auth != Auth.ANONYMOUS) {
      argv.add("--src-creds=" + USER + ":" + PASSWORD);
    }
    argv.add("docker://" + host() + "/" + repoAndTag);
    argv.add("oci:" + dir);
    TestImages.run(argv);
  }

  /** {@code sha256:...} of the manifest (or index) that {@code repoAndTag} names. */
  public String manifestDigest(String repoAndTag) throws IOException, InterruptedException {
    return "sha256:" + ImageStore.sha256Hex(rawManifest(repoAndTag));
  }

  /** Kills the registry and stops the token server. */
  @Override
  public void close() throws InterruptedException {
    registry.destroyForcibly().waitFor();
    if (tokenServer != null) {
      tokenServer.stop(0);
    }
  }

  /** skopeo with its signature policy off: the test registry's images are not signed. */
  private static List<String> skopeo(String command) {
    return List.of("/usr/bin/skopeo", "--insecure-policy", command);
  }

  private static boolean holdsIndex(Path ociLayout) throws IOException {
    String mediaType =
        JSON.readTree(ociLayout.resolve("index.json").toFile())
            .path("manifests")
            .path(0)
            .path("mediaType")
            .asText();
    return mediaType.equals("application/vnd.oci.image.index.v1+json")
        || mediaType.equals("application/vnd.docker.distribution.manifest.list.v2+json");
  }

  /**
   * Whether the registry bound its port and answers {@code GET /v2/}. The log line comes first: an
   * answer alone may come from another process that took the port this one then failed to bind.
   */
  private boolean awaitReady() throws IOException, InterruptedException {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    HttpRequest ping =
        HttpRequest.newBuilder(baseUri().resolve("/v2/")).timeout(Duration.ofSeconds(2)).build();
    String listening = "listening on " + host();
    long end = System.nanoTime() + START_TIMEOUT.toNanos();
    while (System.nanoTime() < end && registry.isAlive()) {
      if (!Files.readString(log).contains(listening)) {
        Thread.sleep(50);
        continue;
      }
      try {
        int status = http.send(ping, HttpResponse.BodyHandlers.discarding()).statusCode();
        if (status == 200 || status == 401) {
          return true;
        }
      } catch (IOException notServingYet) {
        // bound, but not accepting connections yet: asked again below
      }
      Thread.sleep(50);
    }
    return false;
  }

  private String logTail() throws IOException {
    List<String> lines = Files.readAllLines(log);
    return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  private static Path writeConfig(Path dir, int port, Auth auth, HttpServer tokenServer)
      throws IOException {
    Path storage = Files.createDirectories(dir.resolve("storage"));
    StringBuilder yaml =
        new StringBuilder(
            """
            version: 0.1
            log:
              level: info
              accesslog:
                disabled: true
            storage:
              filesystem:
                rootdirectory: %s
              delete:
                enabled: true
            http:
              addr: 127.0.0.1:%d
              secret: sandbox4j-test-secret
            """
                .formatted(storage, port));
    switch (auth) {
      case ANONYMOUS -> {}
      case BASIC -> {
        Path htpasswd = dir.resolve("htpasswd");
        // The registry accepts bcrypt hashes only; cost 4, the least, keeps each request cheap.
        byte[] salt = new byte[16];
        new SecureRandom().nextBytes(salt);
        Files.writeString(
            htpasswd,
            USER + ":" + OpenBSDBCrypt.generate("2y", PASSWORD.toCharArray(), salt, 4) + "\n");
        yaml.append(
            """
            auth:
              htpasswd:
                realm: sandbox4j-test
                path: %s
            """
                .formatted(htpasswd));
      }
      case TOKEN ->
          yaml.append(
              """
              auth:
                token:
                  realm: http://127.0.0.1:%d/token
                  service: %s
                  issuer: %s
                  rootcertbundle: %s
              """
                  .formatted(
                      tokenServer.getAddress().getPort(),
                      TOKEN_SERVICE,
                      TOKEN_ISSUER,
                      dir.resolve("token.crt")));
    }
    Path config = dir.resolve("config.yml");
    Files.writeString(config, yaml);
    return config;
  }

  /**
   * The token server the registry sends clients to: {@code GET /token?service=...&scope=...}. Like
   * Docker Hub's for a private repository, it grants the requested actions to a client with the
   * right Basic credentials, refuses wrong ones with 401, and gives an anonymous client a token
   * that grants nothing. Its RS256 tokens carry their signing certificate in {@code x5c}; the
   * registry trusts that self-signed certificate ({@code rootcertbundle}).
   */
  private static HttpServer startTokenServer(Path dir) throws IOException, InterruptedException {
    Path key = dir.resolve("token.key");
    Path cert = dir.resolve("token.crt");
    TestImages.run(
        List.of(
            "/usr/bin/openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key.toString(),
            "-out",
            cert.toString(),
            "-days",
            "2",
            "-subj",
            "/CN=" + TOKEN_ISSUER));
    TokenSigner signer = new TokenSigner(readPrivateKey(key), readCertificate(cert));
    HttpServer server =
        HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    server.createContext(
        "/token",
        exchange -> {
          try (exchange) {
            issueToken(exchange, signer);
          }
        });
    server.start();
    return server;
  }

  private static void issueToken(HttpExchange exchange, TokenSigner signer) throws IOException {
    Map<String, List<String>> query = queryParameters(exchange.getRequestURI().getRawQuery());
    if (!query.getOrDefault("service", List.of(TOKEN_SERVICE)).equals(List.of(TOKEN_SERVICE))) {
      respond(exchange, 400, "{\"details\":\"unknown service\"}");
      return;
    }
    String authorization = exchange.getRequestHeaders().getFirst("Authorization");
    String subject = "";
    boolean granted = false;
    if (authorization != null) {
      if (!authorization.equals(basic(USER, PASSWORD))) {
        exchange.getResponseHeaders().add("WWW-Authenticate", "Basic realm=\"sandbox4j-test\"");
        respond(exchange, 401, "{\"details\":\"incorrect username or password\"}");
        return;
      }
      subject = USER;
      granted = true;
    }
    ArrayNode access = JSON.createArrayNode();
    if (granted) {
      for (String scopes : query.getOrDefault("scope", List.of())) {
        for (String scope : scopes.split(" ")) {
          access.add(accessEntry(scope));
        }
      }
    }
    Instant now = Instant.now();
    String token = signer.sign(subject, access, now);
    ObjectNode body = JSON.createObjectNode();
    body.put("token", token);
    body.put("access_token", token);
    body.put("expires_in", TOKEN_LIFETIME.toSeconds());
    body.put("issued_at", now.toString());
    respond(exchange, 200, JSON.writeValueAsString(body));
  }

  /** {@code Basic base64(user:password)}, the Authorization header of those credentials. */
  public static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  /** {@code repository:NAME:pull,push} as the token's access claim lists it. */
  private static ObjectNode accessEntry(String scope) {
    int first = scope.indexOf(':');
    int last = scope.lastIndexOf(':');
    if (first < 0 || first == last) {
      throw new IllegalArgumentException("not a scope: " + scope);
    }
    ObjectNode entry = JSON.createObjectNode();
    entry.put("type", scope.substring(0, first));
    entry.put("name", scope.substring(first + 1, last));
    ArrayNode actions = entry.putArray("actions");
    Arrays.stream(scope.substring(last + 1).split(",")).forEach(actions::add);
    return entry;
  }

  private static Map<String, List<String>> queryParameters(String rawQuery) {
    Map<String, List<String>> parameters = new LinkedHashMap<>();
    if (rawQuery == null) {
      return parameters;
    }
    for (String pair : rawQuery.split("&")) {
      int eq = pair.indexOf('=');
      String name = decode(eq < 0 ? pair : pair.substring(0, eq));
      String value = eq < 0 ? "" : decode(pair.substring(eq + 1));
      parameters.computeIfAbsent(name, n -> new ArrayList<>()).add(value);
    }
    return parameters;
  }

  private static String decode(String s) {
    return java.net.URLDecoder.decode(s, StandardCharsets.UTF_8);
  }

  private static void respond(HttpExchange exchange, int status, String json) throws IOException {
    byte[] body = json.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().add("Content-Type", "application/json");
    exchange.sendResponseHeaders(status, body.length);
    exchange.getResponseBody().write(body);
  }

  private static PrivateKey readPrivateKey(Path pem) throws IOException {
    String base64 =
        Files.readString(pem)
            .replace("-----BEGIN PRIVATE KEY-----", "")
            .replace("-----END PRIVATE KEY-----", "")
            .replaceAll("\\s", "");
    try {
      return KeyFactory.getInstance("RSA")
          .generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
    } catch (java.security.GeneralSecurityException e) {
      throw new IOException("cannot read the token signing key " + pem, e);
    }
  }

  private static X509Certificate readCertificate(Path pem) throws IOException {
    try (InputStream in = Files.newInputStream(pem)) {
      return (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
    } catch (java.security.cert.CertificateException e) {
      throw new IOException("cannot read the token certificate " + pem, e);
    }
  }

  /** Signs the registry's JWTs with RS256, the certificate in the header's {@code x5c}. */
  private record TokenSigner(PrivateKey key, X509Certificate certificate) {
    private static final Base64.Encoder URL = Base64.getUrlEncoder().withoutPadding();

    String sign(String subject, ArrayNode access, Instant now) throws IOException {
      try {
        ObjectNode header = JSON.createObjectNode();
        header.put("typ", "JWT");
        header.put("alg", "RS256");
        header.putArray("x5c").add(Base64.getEncoder().encodeToString(certificate.getEncoded()));
        ObjectNode claims = JSON.createObjectNode();
        claims.put("iss", TOKEN_ISSUER);
        claims.put("sub", subject);
        claims.put("aud", TOKEN_SERVICE);
        claims.put("exp", now.plus(TOKEN_LIFETIME).getEpochSecond());
        claims.put("nbf", now.minusSeconds(10).getEpochSecond());
        claims.put("iat", now.getEpochSecond());
        byte[] jti = new byte[16];
        new SecureRandom().nextBytes(jti);
        claims.put("jti", HexFormat.of().formatHex(jti));
        claims.set("access", access);
        String signingInput =
            URL.encodeToString(JSON.writeValueAsBytes(header))
                + "."
                + URL.encodeToString(JSON.writeValueAsBytes(claims));
        Signature rs256 = Signature.getInstance("SHA256withRSA");
        rs256.initSign(key);
        rs256.update(signingInput.getBytes(StandardCharsets.US_ASCII));
        return signingInput + "." + URL.encodeToString(rs256.sign());
      } catch (java.security.GeneralSecurityException e) {
        throw new IOException("cannot sign a token", e);
      }
    }
  }
}
