package dev.sandbox4j.runtime.internal.ports;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.LocalhostResolverProvider;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 6, port URLs: a node server inside a sandbox is reachable through {@code
 * http://{port}-{id}.localhost:{proxyPort}/} (HTTP and WebSocket, with {@code java.net.http}; the
 * test JVM resolves {@code *.localhost} to 127.0.0.1 through {@link LocalhostResolverProvider}), a
 * token guards it, a request wakes a suspended sandbox, a TCP forward reaches it, and destroy ends
 * both. Works in a private home (so its own proxy port and supervisor), seeded with the default
 * image, which has node.
 */
class PortProxyTest {
  private static final int PORT = 8080;

  @TempDir static Path temp;

  private static Path home;
  private static LocalSandbox sandboxes;
  private static Workspace web;
  private static WorkspaceRef webRef;
  private static final HttpClient HTTP =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(20))
          .build();

  @BeforeAll
  static void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    sandboxes = LocalSandbox.builder().home(home).progress(line -> {}).build();
    web = Workspace.of(sandboxes.newBackend());
    webRef = web.open();
    startServer(web, PORT);
    awaitProxy();
  }

  @AfterAll
  static void tearDown() throws IOException {
    TestImages.destroyAllAndDelete(sandboxes, home);
  }

  @Test
  void theUrlServesHttpFromInsideTheSandbox() throws Exception {
    URI url = sandboxes.url(webRef, PORT);
    int proxyPort = Integer.parseInt(Files.readString(home.resolve("network/proxy-port")).strip());
    assertThat(url)
        .hasToString("http://" + PORT + "-" + webRef.id() + ".localhost:" + proxyPort + "/");
    assertThat(sandboxes.list())
        .filteredOn(i -> i.ref().equals(webRef))
        .singleElement()
        .extracting(SandboxInfo::portUrl)
        .isEqualTo("http://{port}-" + webRef.id() + ".localhost:" + proxyPort + "/");

    HttpResponse<String> get = HTTP.send(get(url.resolve("/hello?x=1")), text());
    assertThat(get.statusCode()).isEqualTo(200);
    assertThat(get.body()).contains("\"url\":\"/hello?x=1\"").contains("\"method\":\"GET\"");

    String kib = "x".repeat(1024);
    HttpResponse<String> post =
        HTTP.send(
            HttpRequest.newBuilder(url.resolve("/upload"))
                .POST(HttpRequest.BodyPublishers.ofString(kib))
                .build(),
            text());
    assertThat(post.statusCode()).isEqualTo(200);
    assertThat(post.body()).contains("\"bodyLength\":1024").contains("\"method\":\"POST\"");
  }

  @Test
  void aChunkedUploadIsFramedAndPassedOn() throws Exception {
    int proxyPort = sandboxes.url(webRef, PORT).getPort();
    try (Socket s = new Socket("127.0.0.1", proxyPort)) {
      s.setSoTimeout(30_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("POST /chunked HTTP/1.1\r\nHost: "
                  + PORT
                  + "-"
                  + webRef.id()
                  + ".localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
              .getBytes(StandardCharsets.ISO_8859_1));
      assertThat(readResponse(s)).startsWith("HTTP/1.1 200").contains("\"bodyLength\":11");
      assertThat(exchange(s, PORT + "-" + webRef.id() + ".localhost", "/next", ""))
          .startsWith("HTTP/1.1 200")
          .contains("\"url\":\"/next\"");
      out.write(
          ("POST /smuggle HTTP/1.1\r\nHost: "
                  + PORT
                  + "-"
                  + webRef.id()
                  + ".localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
              .getBytes(StandardCharsets.ISO_8859_1));
      assertThat(readResponse(s)).startsWith("HTTP/1.1 400");
    }
  }

  @Test
  void aWebSocketEchoesThroughTheUrl() throws Exception {
    URI url = sandboxes.url(webRef, PORT);
    URI ws = URI.create("ws://" + url.getAuthority() + "/chat");
    CompletableFuture<String> reply = new CompletableFuture<>();
    WebSocket socket =
        HTTP.newWebSocketBuilder()
            .buildAsync(
                ws,
                new WebSocket.Listener() {
                  private final StringBuilder text = new StringBuilder();

                  @Override
                  public CompletionStage<?> onText(
                      WebSocket webSocket, CharSequence data, boolean last) {
                    text.append(data);
                    if (last) {
                      reply.complete(text.toString());
                    }
                    webSocket.request(1);
                    return null;
                  }
                })
            .get(30, TimeUnit.SECONDS);
    socket.sendText("hello through the proxy", true).get(30, TimeUnit.SECONDS);
    assertThat(reply.get(30, TimeUnit.SECONDS)).isEqualTo("echo:hello through the proxy");
    socket.sendClose(WebSocket.NORMAL_CLOSURE, "done").get(30, TimeUnit.SECONDS);
  }

  @Test
  void anH2cUpgradeTurnsTheConnectionIntoABytePipe() throws Exception {
    int proxyPort = sandboxes.url(webRef, PORT).getPort();
    try (Socket s = new Socket("127.0.0.1", proxyPort)) {
      s.setSoTimeout(30_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("GET / HTTP/1.1\r\nHost: "
                  + PORT
                  + "-"
                  + webRef.id()
                  + ".localhost\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                  + "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
              .getBytes(StandardCharsets.ISO_8859_1));
      assertThat(readResponse(s)).startsWith("HTTP/1.1 101");
      // Not HTTP/1.1 any more: the HTTP/2 preface must pass through untouched, not be parsed.
      byte[] preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
      out.write(preface);
      out.flush();
      assertThat(s.getInputStream().readNBytes(preface.length)).isEqualTo(preface);
    }
  }

  @Test
  void aTokenIsRequiredAndNeverReachesTheSandbox() throws Exception {
    LocalSandbox guarded =
        LocalSandbox.builder().home(home).progress(line -> {}).portToken(true).build();
    Workspace ws = Workspace.of(guarded.newBackend());
    WorkspaceRef ref = ws.open();
    try {
      startServer(ws, PORT);
      String token = guarded.portToken(ref).orElseThrow();
      assertThat(sandboxes.portToken(webRef)).isEmpty();
      assertThat(
              Files.getPosixFilePermissions(home.resolve("sandboxes/" + ref.id() + "/port-token")))
          .isEqualTo(PosixFilePermissions.fromString("rw-------"));
      URI url = guarded.url(ref, PORT);

      HttpResponse<String> missing = HTTP.send(get(url.resolve("/secret")), text());
      assertThat(missing.statusCode()).isEqualTo(401);
      assertThat(missing.body()).contains("missing token");
      HttpResponse<String> wrong =
          HTTP.send(
              HttpRequest.newBuilder(url.resolve("/secret"))
                  .header("X-Sandbox4j-Token", token + "x")
                  .build(),
              text());
      assertThat(wrong.statusCode()).as(wrong.body()).isEqualTo(401);
      HttpResponse<String> wrongQuery =
          HTTP.send(get(url.resolve("/secret?s4j_token=nope")), text());
      assertThat(wrongQuery.statusCode()).isEqualTo(401);
      assertThat(
              ws.run(Command.shell("cat /tmp/requests-" + PORT + ".log 2>/dev/null")).stdoutText())
          .as("the server inside saw none of the refused requests")
          .isEmpty();

      HttpResponse<String> byHeader =
          HTTP.send(
              HttpRequest.newBuilder(url.resolve("/secret"))
                  .header("X-Sandbox4j-Token", token)
                  .build(),
              text());
      assertThat(byHeader.statusCode()).isEqualTo(200);
      HttpResponse<String> byQuery =
          HTTP.send(get(url.resolve("/secret?a=1&s4j_token=" + token + "&b=2")), text());
      assertThat(byQuery.statusCode()).isEqualTo(200);
      assertThat(byQuery.body()).contains("\"url\":\"/secret?a=1&b=2\"");

      String seen = ws.run(Command.shell("cat /tmp/requests-" + PORT + ".log")).stdoutText();
      assertThat(seen.lines()).hasSize(2);
      assertThat(seen).doesNotContain(token).doesNotContainIgnoringCase("x-sandbox4j-token");
      CommandResult env = ws.run(Command.shell("env; cat /proc/*/environ 2>/dev/null; true"));
      assertThat(env.stdoutText()).doesNotContain(token);

      // One kept-alive connection, as a client pooling by address uses it: the token is stripped
      // from every request, and a request for another sandbox is checked on its own.
      int proxyPort = url.getPort();
      String guardedHost = PORT + "-" + ref.id() + ".localhost";
      String webHost = PORT + "-" + webRef.id() + ".localhost";
      try (Socket s = new Socket("127.0.0.1", proxyPort)) {
        s.setSoTimeout(30_000);
        assertThat(exchange(s, guardedHost, "/one", "X-Sandbox4j-Token: " + token))
            .startsWith("HTTP/1.1 200");
        assertThat(exchange(s, guardedHost, "/two?s4j_token=" + token, "X-Sandbox4j-Token: x"))
            .startsWith("HTTP/1.1 200")
            .contains("\"url\":\"/two\"");
        assertThat(exchange(s, webHost, "/other", "")).startsWith("HTTP/1.1 200");
        assertThat(exchange(s, guardedHost, "/three", "")).startsWith("HTTP/1.1 401");
      }
      String after = ws.run(Command.shell("cat /tmp/requests-" + PORT + ".log")).stdoutText();
      assertThat(after.lines()).hasSize(4);
      assertThat(after).doesNotContain(token).doesNotContainIgnoringCase("x-sandbox4j-token");
    } finally {
      guarded.destroy(ref);
    }
  }

  @Test
  void badHostsUnknownSandboxesAndClosedPortsGetClearErrors() throws Exception {
    int proxyPort = sandboxes.url(webRef, PORT).getPort();
    assertThat(raw(proxyPort, "example.com")).startsWith("HTTP/1.1 400").contains("{port}-{id}");
    assertThat(raw(proxyPort, "0-" + webRef.id() + ".localhost")).startsWith("HTTP/1.1 400");
    assertThat(raw(proxyPort, "70000-" + webRef.id() + ".localhost")).startsWith("HTTP/1.1 400");
    assertThat(raw(proxyPort, "80-BAD_ID.localhost")).startsWith("HTTP/1.1 400");
    assertThat(raw(proxyPort, PORT + "-" + webRef.id() + ".localhost:1"))
        .startsWith("HTTP/1.1 400");
    assertThat(raw(proxyPort, PORT + "-nosuchsandbox.localhost"))
        .startsWith("HTTP/1.1 404")
        .contains("no sandbox local:nosuchsandbox");
    assertThat(raw(proxyPort, "8081-" + webRef.id() + ".localhost:" + proxyPort))
        .startsWith("HTTP/1.1 502")
        .contains("nothing listens on port 8081");
    assertThatThrownBy(() -> sandboxes.url(webRef, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> sandboxes.url(new WorkspaceRef("local", "nosuchsandbox"), PORT))
        .isInstanceOf(WorkspaceUnavailableException.class);
  }

  @Test
  void aRequestWakesASuspendedSandbox() throws Exception {
    sandboxes.suspend(webRef);
    assertThat(state(webRef)).isEqualTo("suspended");
    HttpResponse<String> r = HTTP.send(get(sandboxes.url(webRef, PORT).resolve("/wake")), text());
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).contains("\"url\":\"/wake\"");
    assertThat(state(webRef)).isEqualTo("running");
  }

  @Test
  void aRequestRestoresAHibernatedSandboxAndStartsAStoppedOne() throws Exception {
    Prerequisites.require(
        Checkpoints.unavailable(TestImages.engineOf(sandboxes).runtime()).isEmpty(),
        "checkpoint/restore: "
            + Checkpoints.unavailable(TestImages.engineOf(sandboxes).runtime()).orElse("")
            + " (sandbox4j setup)");
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    try {
      startServer(ws, PORT);
      URI url = sandboxes.url(ref, PORT);
      sandboxes.hibernate(ref);
      assertThat(state(ref)).isEqualTo("hibernated");
      HttpResponse<String> restored = HTTP.send(get(url.resolve("/restored")), text());
      assertThat(restored.statusCode()).as(restored.body()).isEqualTo(200);
      assertThat(restored.body()).contains("\"url\":\"/restored\"");
      assertThat(state(ref)).isEqualTo("running");

      sandboxes.stop(ref);
      assertThat(state(ref)).isEqualTo("stopped");
      HttpResponse<String> started = HTTP.send(get(url.resolve("/started")), text());
      assertThat(started.statusCode())
          .as("a stopped sandbox starts afresh, without its server")
          .isEqualTo(502);
      assertThat(started.body()).contains("nothing listens on port " + PORT);
      assertThat(state(ref)).isEqualTo("running");
    } finally {
      sandboxes.destroy(ref);
    }
  }

  @Test
  void tcpForwardingReachesTheSandboxPort() throws Exception {
    int hostPort = sandboxes.forwardTcp(webRef, PORT);
    assertThat(sandboxes.forwardTcp(webRef, PORT)).isEqualTo(hostPort);
    String response = raw(hostPort, "anything");
    assertThat(response).startsWith("HTTP/1.1 200").contains("\"url\":\"/raw\"");
  }

  @Test
  void destroyStopsServing() throws Exception {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    startServer(ws, PORT);
    URI url = sandboxes.url(ref, PORT);
    int hostPort = sandboxes.forwardTcp(ref, PORT);
    assertThat(HTTP.send(get(url), text()).statusCode()).isEqualTo(200);
    assertThat(raw(hostPort, "x")).startsWith("HTTP/1.1 200");

    sandboxes.destroy(ref);

    HttpResponse<String> after = HTTP.send(get(url), text());
    assertThat(after.statusCode()).as(after.body()).isEqualTo(404);
    await("the forward's listener to close", () -> !accepts(hostPort));
  }

  // ---- helpers ------------------------------------------------------------------------------

  private static void startServer(Workspace ws, int port) throws IOException {
    try (InputStream script = PortProxyTest.class.getResourceAsStream("port-server.js")) {
      ws.writeBytes("/tmp/port-server.js", script.readAllBytes());
    }
    CommandResult started =
        ws.run(
            Command.shell(
                "nohup node /tmp/port-server.js "
                    + port
                    + " >/tmp/server.out 2>&1 &"
                    + " for i in $(seq 300); do [ -f /tmp/listening-"
                    + port
                    + " ] && exit 0; sleep 0.1; done; cat /tmp/server.out; exit 1"));
    assertThat(started.exitCode()).as(started.stdoutText()).isZero();
  }

  private static void awaitProxy() throws InterruptedException {
    int proxyPort = sandboxes.url(webRef, PORT).getPort();
    await("the supervisor's port proxy", () -> accepts(proxyPort));
  }

  private static boolean accepts(int port) {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 1000);
      return true;
    } catch (ConnectException e) {
      return false;
    } catch (IOException e) {
      return false;
    }
  }

  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > end) {
        throw new AssertionError("waited 30 s for " + what);
      }
      Thread.sleep(50);
    }
  }

  /** One request with a raw socket, so that any Host can be sent; the whole response. */
  private static String raw(int port, String host) throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(30_000);
      OutputStream out = s.getOutputStream();
      out.write(
          ("GET /raw HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
              .getBytes(StandardCharsets.ISO_8859_1));
      out.flush();
      return new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /** One GET on a kept-alive socket; the response (node answers with a Content-Length). */
  private static String exchange(Socket s, String host, String path, String header)
      throws IOException {
    s.getOutputStream()
        .write(
            ("GET "
                    + path
                    + " HTTP/1.1\r\nHost: "
                    + host
                    + "\r\n"
                    + (header.isEmpty() ? "" : header + "\r\n")
                    + "\r\n")
                .getBytes(StandardCharsets.ISO_8859_1));
    return readResponse(s);
  }

  /** Reads one response: its head, and as many body bytes as its Content-Length says. */
  private static String readResponse(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    StringBuilder head = new StringBuilder();
    while (!head.toString().endsWith("\r\n\r\n")) {
      int b = in.read();
      if (b < 0) {
        return head.toString();
      }
      head.append((char) b);
    }
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("(?i)content-length: *([0-9]+)").matcher(head);
    int length = m.find() ? Integer.parseInt(m.group(1)) : 0;
    return head + new String(in.readNBytes(length), StandardCharsets.UTF_8);
  }

  private static HttpRequest get(URI uri) {
    return HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(60)).build();
  }

  private static HttpResponse.BodyHandler<String> text() {
    return HttpResponse.BodyHandlers.ofString();
  }

  private static String state(WorkspaceRef ref) {
    return sandboxes.list().stream()
        .filter(i -> i.ref().equals(ref))
        .map(SandboxInfo::state)
        .findFirst()
        .orElse("gone");
  }

  private static List<ProcessHandle> supervisors() {
    return TestImages.supervisors(home);
  }
}
