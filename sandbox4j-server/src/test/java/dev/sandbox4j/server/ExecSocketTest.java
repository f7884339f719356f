package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kept-open exec WebSockets ({@code ?keepOpen=true}, docs/server-api.md): several commands over one
 * socket, each after the first checked again like a new request, the idle close, and the frames
 * that cross a command's end. Against a real server and engine.
 */
class ExecSocketTest {

  /**
   * Short, so that the idle close is seen quickly, yet long enough that a loaded machine never
   * idles out a socket between two requests a test sends one after the other.
   */
  private static final Duration IDLE = Duration.ofSeconds(5);

  @TempDir static Path data;
  static TestServer s;
  static String key;
  static String sandbox;

  @BeforeAll
  static void start() throws Exception {
    TestServer.requireLocalEngine();
    s = new TestServer(data, b -> b.execSocketIdle(IDLE));
    key = s.key("acme");
    sandbox = s.create(key, "{}");
  }

  @AfterAll
  static void stop() {
    if (s != null) {
      s.close();
    }
  }

  private static ServerApiTest.Socket keptOpen(String key, String id) throws Exception {
    return ServerApiTest.Socket.open(s, key, id, "?keepOpen=true");
  }

  /** Waits until {@code n} commands ended (exit or error events) on {@code socket}. */
  private static void awaitEnds(ServerApiTest.Socket socket, int n) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (ends(socket.events()) < n) {
      assertThat(System.nanoTime()).as("waiting for %d command ends", n).isLessThan(deadline);
      Thread.sleep(5);
    }
  }

  private static long ends(List<JsonNode> events) {
    return events.stream()
        .map(e -> e.get("type").asText())
        .filter(t -> t.equals("exit") || t.equals("error"))
        .count();
  }

  private static List<String> types(ServerApiTest.Socket socket) {
    return socket.events().stream().map(e -> e.get("type").asText()).toList();
  }

  private static boolean exists(String path) throws Exception {
    return TestServer.stdout(
            s.exec(key, sandbox, "{\"shell\": \"test -e " + path + " && echo yes || echo no\"}"),
            "stdout")
        .equals("yes\n");
  }

  @Test
  void aKeptOpenSocketRunsOneCommandAfterAnother() throws Exception {
    int upgradesBefore = logLines("GET", "/v1/sandboxes/{id}/exec");
    int commandsBefore = logLines("WS", ApiServlet.EXEC_COMMAND_ROUTE);
    ServerApiTest.Socket ws = keptOpen(key, sandbox);
    ws.send("{\"shell\": \"echo one\", \"stdin\": false}");
    awaitEnds(ws, 1);
    ws.send("{\"shell\": \"echo two; exit 3\", \"stdin\": false}");
    awaitEnds(ws, 2);

    assertThat(types(ws)).containsExactly("started", "stdout", "exit", "started", "stdout", "exit");
    assertThat(TestServer.stdout(ws.events(), "stdout")).isEqualTo("one\ntwo\n");
    assertThat(ws.events().get(5).get("exitCode").asInt()).isEqualTo(3);
    assertThat(ws.closed).as("the socket waits for the next command").isNotDone();
    assertThat(logLines("GET", "/v1/sandboxes/{id}/exec") - upgradesBefore).isEqualTo(1);
    awaitLogLines("WS", ApiServlet.EXEC_COMMAND_ROUTE, commandsBefore + 2);
    ws.socket.abort();
  }

  @Test
  void eachCommandAfterTheFirstChecksTheKeyAgain() throws Exception {
    ServerKeys.CreatedKey second;
    try (ServerKeys keys = ServerKeys.open(data)) {
      second = keys.create("acme");
    }
    ServerApiTest.Socket ws = keptOpen(second.key(), sandbox);
    ws.send("{\"argv\": [\"true\"], \"stdin\": false}");
    awaitEnds(ws, 1);
    try (ServerKeys keys = ServerKeys.open(data)) {
      assertThat(keys.revoke(second.id())).isTrue();
    }
    ws.send("{\"argv\": [\"touch\", \"/tmp/after-revoke\"], \"stdin\": false}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1008);
    JsonNode last = ws.events().getLast();
    assertThat(last.get("type").asText()).isEqualTo("error");
    assertThat(last.get("error").get("code").asText()).isEqualTo("unauthenticated");
    assertThat(types(ws)).containsExactly("started", "exit", "error");
    assertThat(exists("/tmp/after-revoke")).as("a revoked key ran a command").isFalse();
  }

  @Test
  void eachCommandAfterTheFirstChecksTheSandboxAgain() throws Exception {
    String doomed = s.create(key, "{}");
    ServerApiTest.Socket ws = keptOpen(key, doomed);
    ws.send("{\"argv\": [\"true\"], \"stdin\": false}");
    awaitEnds(ws, 1);
    assertThat(s.call(key, "DELETE", "/v1/sandboxes/" + doomed, null).status()).isEqualTo(204);
    ws.send("{\"argv\": [\"true\"], \"stdin\": false}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1008);
    assertThat(ws.events().getLast().get("error").get("code").asText()).isEqualTo("not_found");
  }

  @Test
  void anIdleSocketIsClosedInOrderAndRunsNothingAfterwards() throws Exception {
    ServerApiTest.Socket ws = keptOpen(key, sandbox);
    // The server's idle time starts when the command ends, which is after this send: so the
    // close comes at least IDLE after it, however late this thread sees the command's end.
    long sent = System.nanoTime();
    ws.send("{\"argv\": [\"true\"], \"stdin\": false}");
    awaitEnds(ws, 1);
    assertThat(ws.closed.get(60, TimeUnit.SECONDS)).isEqualTo(1000);
    assertThat(Duration.ofNanos(System.nanoTime() - sent))
        .as("closed only after the idle time")
        .isGreaterThanOrEqualTo(IDLE);
    assertThat(types(ws)).containsExactly("started", "exit");
  }

  @Test
  void framesThatCrossACommandsEndAreMootOthersAreRefused() throws Exception {
    ServerApiTest.Socket ws = keptOpen(key, sandbox);
    ws.send("{\"argv\": [\"true\"], \"stdin\": false}");
    awaitEnds(ws, 1);
    // a cancel or stdin the client sent as the command ended: nothing to do, the socket stays
    ws.send("{\"type\": \"cancel\"}");
    ws.send("{\"type\": \"stdin_eof\"}");
    ws.send("{\"shell\": \"echo still here\", \"stdin\": false}");
    awaitEnds(ws, 2);
    assertThat(TestServer.stdout(ws.events(), "stdout")).isEqualTo("still here\n");

    ws.send("{\"type\": \"bogus\"}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1008);
    assertThat(ws.events().getLast().get("error").get("field").asText()).isEqualTo("type");
  }

  @Test
  void aRequestsTraceContextIsBoundedAndAMalformedOneIsIgnored() throws Exception {
    ServerApiTest.Socket ws = keptOpen(key, sandbox);
    // not a valid traceparent: the propagator ignores it, the command runs
    ws.send("{\"argv\": [\"true\"], \"stdin\": false, \"trace\": {\"traceparent\": \"nonsense\"}}");
    awaitEnds(ws, 1);
    assertThat(types(ws)).containsExactly("started", "exit");
    String tooLong = "x".repeat(513);
    ws.send(
        "{\"argv\": [\"true\"], \"stdin\": false, \"trace\": {\"tracestate\": \""
            + tooLong
            + "\"}}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1008);
    assertThat(ws.events().getLast().get("error").get("field").asText())
        .isEqualTo("trace.tracestate");
  }

  @Test
  void aCancelledCommandClosesAKeptOpenSocket() throws Exception {
    ServerApiTest.Socket ws = keptOpen(key, sandbox);
    ws.send("{\"shell\": \"echo ready; sleep 1000\", \"stdin\": false}");
    ws.awaitOutput("ready");
    ws.send("{\"type\": \"cancel\"}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1000);
    assertThat(types(ws)).containsExactly("started", "stdout");
  }

  @Test
  void aPlainSocketSendsNoStartedAndClosesAfterItsCommand() throws Exception {
    ServerApiTest.Socket ws = ServerApiTest.Socket.open(s, key, sandbox, "?keepOpen=false");
    ws.send("{\"argv\": [\"true\"], \"stdin\": false}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1000);
    assertThat(types(ws)).containsExactly("exit");
  }

  @Test
  void aBadKeepOpenValueOrQueryParameterIsA400NamingIt() throws Exception {
    String exec = "/v1/sandboxes/" + sandbox + "/exec";
    TestServer.Answer maybe = s.call(key, "GET", exec + "?keepOpen=maybe", null);
    assertThat(maybe.status()).isEqualTo(400);
    assertThat(maybe.json().get("error").get("field").asText()).isEqualTo("keepOpen");
    TestServer.Answer unknown = s.call(key, "GET", exec + "?keepopen=true", null);
    assertThat(unknown.status()).isEqualTo(400);
    assertThat(unknown.json().get("error").get("field").asText()).isEqualTo("keepopen");
  }

  private static int logLines(String method, String route) throws Exception {
    int n = 0;
    for (String line : s.logLines) {
      JsonNode json = TestServer.JSON.readTree(line);
      if (json.get("method").asText().equals(method) && json.get("route").asText().equals(route)) {
        n++;
      }
    }
    return n;
  }

  /** The runner logs a command after its last event went out: poll for the line. */
  private static void awaitLogLines(String method, String route, int n) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (logLines(method, route) < n) {
      assertThat(System.nanoTime()).as("waiting for %d log lines", n).isLessThan(deadline);
      Thread.sleep(5);
    }
    assertThat(logLines(method, route)).isEqualTo(n);
  }
}
