package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.InputStream;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The API's routes against a real server and engine: sandboxes, exec (NDJSON, WebSocket), files.
 */
class ServerApiTest {

  @TempDir static Path data;
  static TestServer s;
  static String key;
  static String sandbox;

  @BeforeAll
  static void start() throws Exception {
    TestServer.requireLocalEngine();
    s = new TestServer(data);
    key = s.key("acme");
    sandbox = s.create(key, "{\"labels\": {\"team\": \"a\"}, \"env\": {\"GREETING\": \"hi\"}}");
  }

  @AfterAll
  static void stop() {
    if (s != null) {
      s.close();
    }
  }

  @Test
  void openRoutesNeedNoKeyAndTheApiNeedsOne() throws Exception {
    assertThat(s.call(null, "GET", "/healthz", null).text()).isEqualTo("ok");
    assertThat(s.call(null, "GET", "/v1/openapi.json", null).json().get("openapi").asText())
        .startsWith("3.1");
    TestServer.Answer noKey = s.call(null, "GET", "/v1/sandboxes", null);
    assertThat(noKey.status()).isEqualTo(401);
    assertThat(noKey.error().get("code").asText()).isEqualTo("unauthenticated");
    TestServer.Answer badKey = s.call("s4j_nope", "GET", "/v1/sandboxes", null);
    assertThat(badKey.status()).isEqualTo(401);
  }

  @Test
  void createGetListDelete() throws Exception {
    String id = s.create(key, "{\"labels\": {\"team\": \"b\", \"tier\": \"x\"}}");
    JsonNode got = s.call(key, "GET", "/v1/sandboxes/" + id, null).json();
    assertThat(got.get("id").asText()).isEqualTo(id);
    assertThat(got.get("ref").asText()).isEqualTo("remote:" + id);
    assertThat(got.get("state").asText()).isEqualTo("running");
    assertThat(got.get("labels").get("team").asText()).isEqualTo("b");
    assertThat(got.get("workingDirectory").asText()).isEqualTo("/home/sandbox");

    JsonNode byLabel = s.call(key, "GET", "/v1/sandboxes?label=team=b&label=tier=x", null).json();
    assertThat(byLabel.get("items")).hasSize(1);
    assertThat(byLabel.get("items").get(0).get("id").asText()).isEqualTo(id);
    JsonNode running = s.call(key, "GET", "/v1/sandboxes?state=running", null).json();
    assertThat(running.get("items").size()).isGreaterThanOrEqualTo(2);

    // pagination: one per page visits each sandbox once
    List<String> seen = new java.util.ArrayList<>();
    String cursor = null;
    do {
      JsonNode page =
          s.call(
                  key,
                  "GET",
                  "/v1/sandboxes?limit=1" + (cursor == null ? "" : "&cursor=" + cursor),
                  null)
              .json();
      assertThat(page.get("items").size()).isLessThanOrEqualTo(1);
      page.get("items").forEach(i -> seen.add(i.get("id").asText()));
      cursor = page.get("nextCursor").isNull() ? null : page.get("nextCursor").asText();
    } while (cursor != null);
    assertThat(seen).contains(id, sandbox).doesNotHaveDuplicates();

    assertThat(s.call(key, "DELETE", "/v1/sandboxes/" + id, null).status()).isEqualTo(204);
    TestServer.Answer gone = s.call(key, "GET", "/v1/sandboxes/" + id, null);
    assertThat(gone.status()).isEqualTo(404);
    assertThat(gone.error().get("code").asText()).isEqualTo("not_found");
    assertThat(s.engine.list()).noneMatch(i -> i.ref().id().equals(id));
  }

  @Test
  void execStreamsOutputThenExit() throws Exception {
    List<JsonNode> events =
        s.exec(key, sandbox, "{\"shell\": \"echo $GREETING; echo err >&2; exit 3\"}");
    assertThat(TestServer.stdout(events, "stdout")).isEqualTo("hi\n");
    assertThat(TestServer.stdout(events, "stderr")).isEqualTo("err\n");
    assertThat(events.getLast().get("type").asText()).isEqualTo("exit");
    assertThat(events.getLast().get("exitCode").asInt()).isEqualTo(3);

    String stdin = Base64.getEncoder().encodeToString("piped\n".getBytes(StandardCharsets.UTF_8));
    List<JsonNode> cat =
        s.exec(key, sandbox, "{\"argv\": [\"cat\"], \"stdin\": \"" + stdin + "\"}");
    assertThat(TestServer.stdout(cat, "stdout")).isEqualTo("piped\n");
    assertThat(cat.getLast().get("exitCode").asInt()).isZero();

    List<JsonNode> env =
        s.exec(key, sandbox, "{\"argv\": [\"printenv\", \"X\"], \"env\": {\"X\": \"y\"}}");
    assertThat(TestServer.stdout(env, "stdout")).isEqualTo("y\n");
  }

  /**
   * The script reaches the sandbox's shell byte for byte: neither the server nor the engine expands
   * a {@code $} on the way (a loop's {@code $i} once seemed to arrive empty; that was the caller's
   * own shell, expanding it inside double quotes before the CLI ran).
   */
  @Test
  void aShellLoopsVariableIsExpandedOnlyByTheSandboxsShell() throws Exception {
    String loop = "for i in 1 2 3; do echo \\\"$i\\\" $i; done; echo \\\"$GREETING\\\"";
    assertThat(TestServer.stdout(s.exec(key, sandbox, "{\"shell\": \"" + loop + "\"}"), "stdout"))
        .isEqualTo("1 1\n2 2\n3 3\nhi\n");
    assertThat(
            TestServer.stdout(
                s.exec(key, sandbox, "{\"argv\": [\"sh\", \"-c\", \"" + loop + "\"]}"), "stdout"))
        .isEqualTo("1 1\n2 2\n3 3\nhi\n");
    Socket ws = Socket.open(s, key, sandbox);
    ws.send("{\"shell\": \"" + loop + "\", \"stdin\": false}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1000);
    assertThat(TestServer.stdout(ws.events(), "stdout")).isEqualTo("1 1\n2 2\n3 3\nhi\n");
  }

  @Test
  void execTimeoutEndsWithATimeoutErrorEvent() throws Exception {
    List<JsonNode> events =
        s.exec(key, sandbox, "{\"shell\": \"echo started; sleep 30\", \"timeoutMs\": 500}");
    assertThat(TestServer.stdout(events, "stdout")).isEqualTo("started\n");
    JsonNode last = events.getLast();
    assertThat(last.get("type").asText()).isEqualTo("error");
    assertThat(last.get("error").get("code").asText()).isEqualTo("timeout");
    assertThat(last.get("error").get("timeoutMs").asLong()).isEqualTo(500);
  }

  @Test
  void webSocketExecTakesStdinFramesAndEof() throws Exception {
    Socket ws = Socket.open(s, key, sandbox);
    ws.send("{\"argv\": [\"cat\"]}");
    ws.send("{\"type\": \"stdin\", \"data\": \"" + b64("one ") + "\"}");
    ws.send("{\"type\": \"stdin\", \"data\": \"" + b64("two") + "\"}");
    ws.send("{\"type\": \"stdin_eof\"}");
    assertThat(ws.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1000);
    assertThat(TestServer.stdout(ws.events(), "stdout")).isEqualTo("one two");
    assertThat(ws.events().getLast().get("type").asText()).isEqualTo("exit");
    assertThat(ws.events().getLast().get("exitCode").asInt()).isZero();
  }

  @Test
  void webSocketCancelKillsTheCommandTree() throws Exception {
    Socket ws = Socket.open(s, key, sandbox);
    ws.send(
        "{\"shell\": \"(setsid sleep 1000 & echo $! > /tmp/ws-child); echo ready; sleep 1000\","
            + " \"stdin\": false}");
    ws.awaitOutput("ready");
    ws.send("{\"type\": \"cancel\"}");
    ws.closed.get(30, TimeUnit.SECONDS);
    assertThat(ws.events()).noneMatch(e -> e.get("type").asText().equals("exit"));
    // killed, then reaped by the sandbox's init: poll for that, no timing assumed
    String alive = "0\n";
    for (int i = 0; i < 100 && alive.equals("0\n"); i++) {
      alive =
          TestServer.stdout(
              s.exec(
                  key,
                  sandbox,
                  "{\"shell\": \"kill -0 $(cat /tmp/ws-child) 2>/dev/null; echo $?\"}"),
              "stdout");
      if (alive.equals("0\n")) {
        Thread.sleep(100);
      }
    }
    assertThat(alive).as("the setsid child still runs").isEqualTo("1\n");
  }

  @Test
  void webSocketBadRequestsAndFramesAreErrorEventsNamingTheField() throws Exception {
    Socket bad = Socket.open(s, key, sandbox);
    bad.send("{\"argv\": [\"true\"], \"timeoutMs\": -5}");
    assertThat(bad.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1008);
    JsonNode error = bad.events().getLast();
    assertThat(error.get("type").asText()).isEqualTo("error");
    assertThat(error.get("error").get("code").asText()).isEqualTo("invalid_request");
    assertThat(error.get("error").get("field").asText()).isEqualTo("timeoutMs");

    Socket badFrame = Socket.open(s, key, sandbox);
    badFrame.send("{\"shell\": \"echo ready; sleep 1000\"}");
    badFrame.awaitOutput("ready");
    badFrame.send("{\"type\": \"stdin\", \"data\": 5}");
    assertThat(badFrame.closed.get(30, TimeUnit.SECONDS)).isEqualTo(1008);
    assertThat(badFrame.events().getLast().get("error").get("field").asText()).isEqualTo("data");
    assertThat(badFrame.events()).noneMatch(e -> e.get("type").asText().equals("exit"));
  }

  @Test
  void closingTheWebSocketKillsTheCommand() throws Exception {
    Socket ws = Socket.open(s, key, sandbox);
    ws.send("{\"shell\": \"echo $$ > /tmp/ws-close; echo ready; sleep 1000\"}");
    ws.awaitOutput("ready");
    ws.socket.sendClose(WebSocket.NORMAL_CLOSURE, "bye").get(10, TimeUnit.SECONDS);
    // the tree is killed once the server saw the close: poll for it, no timing assumed
    String alive = "0\n";
    for (int i = 0; i < 100 && alive.equals("0\n"); i++) {
      Thread.sleep(100);
      alive =
          TestServer.stdout(
              s.exec(
                  key,
                  sandbox,
                  "{\"shell\": \"kill -0 $(cat /tmp/ws-close) 2>/dev/null; echo $?\"}"),
              "stdout");
    }
    assertThat(alive).isEqualTo("1\n");
  }

  @Test
  void backgroundCommandsReportOutputAndExit() throws Exception {
    TestServer.Answer started =
        s.call(key, "POST", "/v1/sandboxes/" + sandbox + "/commands", "{\"shell\": \"echo bg\"}");
    assertThat(started.status()).as(started.text()).isEqualTo(201);
    String cid = started.json().get("id").asText();
    String path = "/v1/sandboxes/" + sandbox + "/commands/" + cid;
    StringBuilder out = new StringBuilder();
    JsonNode state;
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (true) {
      state = s.call(key, "GET", path, null).json();
      out.append(new String(Base64.getDecoder().decode(state.get("stdout").asText())));
      if (!state.get("running").asBoolean()) {
        break;
      }
      assertThat(System.nanoTime()).as("`echo bg` ended within 60 s").isLessThan(deadline);
      Thread.sleep(20);
    }
    assertThat(out).hasToString("bg\n");
    assertThat(state.get("exitCode").asInt()).isZero();

    TestServer.Answer sleeping =
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/commands",
            "{\"argv\": [\"sleep\", \"1000\"]}");
    assertThat(sleeping.status()).as(sleeping.text()).isEqualTo(201);
    String sleeper = sleeping.json().get("id").asText();
    JsonNode stopped =
        s.call(key, "POST", "/v1/sandboxes/" + sandbox + "/commands/" + sleeper + "/stop", null)
            .json();
    assertThat(stopped.get("running").asBoolean()).isFalse();
    assertThat(s.call(key, "GET", "/v1/sandboxes/" + sandbox + "/commands/nope", null).status())
        .isEqualTo(404);
  }

  @Test
  void aBackgroundCommandsStdinIsWrittenWhileItRunsThenClosed() throws Exception {
    TestServer.Answer started =
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/commands",
            "{\"shell\": \"while read l; do echo \\\"got $l\\\"; done; echo eof\", \"stdin\": \""
                + base64("first\n")
                + "\", \"keepStdinOpen\": true}");
    assertThat(started.status()).as(started.text()).isEqualTo(201);
    String path = "/v1/sandboxes/" + sandbox + "/commands/" + started.json().get("id").asText();
    StringBuilder out = new StringBuilder();
    awaitStdout(path, out, "got first\n");
    assertThat(writeStdin(path, "{\"data\": \"" + base64("one\n") + "\"}").status()).isEqualTo(204);
    awaitStdout(path, out, "got first\ngot one\n");
    assertThat(writeStdin(path, "{\"data\": \"" + base64("two\n") + "\", \"eof\": true}").status())
        .isEqualTo(204);
    JsonNode state = awaitStdout(path, out, "got first\ngot one\ngot two\neof\n");
    while (state.get("running").asBoolean()) {
      Thread.sleep(20); // bounded by the test's default timeout
      state = s.call(key, "GET", path, null).json();
      out.append(new String(Base64.getDecoder().decode(state.get("stdout").asText())));
    }
    assertThat(out).hasToString("got first\ngot one\ngot two\neof\n");
    assertThat(state.get("exitCode").asInt()).isZero();

    // the command is forgotten once its end was collected; a live one shows the 409s
    TestServer.Answer plain =
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/commands",
            "{\"argv\": [\"sleep\", \"1000\"]}");
    String plainPath = "/v1/sandboxes/" + sandbox + "/commands/" + plain.json().get("id").asText();
    TestServer.Answer notOpen = writeStdin(plainPath, "{\"data\": \"eA==\"}");
    assertThat(notOpen.status()).as(notOpen.text()).isEqualTo(409);
    assertThat(notOpen.error().get("code").asText()).isEqualTo("stdin_closed");
    assertThat(notOpen.error().get("message").asText()).contains("keepStdinOpen");
    s.call(key, "POST", plainPath + "/stop", null);

    TestServer.Answer open =
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/commands",
            "{\"argv\": [\"sleep\", \"1000\"], \"keepStdinOpen\": true}");
    String openPath = "/v1/sandboxes/" + sandbox + "/commands/" + open.json().get("id").asText();
    TestServer.Answer bad = writeStdin(openPath, "{\"data\": \"not base64!\"}");
    assertThat(bad.status()).isEqualTo(400);
    assertThat(bad.error().get("field").asText()).isEqualTo("data");
    TestServer.Answer empty = writeStdin(openPath, "{}");
    assertThat(empty.status()).isEqualTo(400);
    assertThat(writeStdin(openPath, "{\"eof\": true}").status()).isEqualTo(204);
    assertThat(writeStdin(openPath, "{\"eof\": true}").status())
        .as("closing twice is fine")
        .isEqualTo(204);
    TestServer.Answer late = writeStdin(openPath, "{\"data\": \"eA==\"}");
    assertThat(late.status()).isEqualTo(409);
    assertThat(late.error().get("code").asText()).isEqualTo("stdin_closed");
    assertThat(late.error().get("message").asText()).contains("closeStdin");
    s.call(key, "POST", openPath + "/stop", null);

    TestServer.Answer onExec =
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/exec",
            "{\"argv\": [\"true\"], \"keepStdinOpen\": true}");
    assertThat(onExec.status()).isEqualTo(400);
    assertThat(onExec.error().get("field").asText()).isEqualTo("keepStdinOpen");
  }

  @Test
  void aStdinWriteWaitsForACommandThatDoesNotReadAndAnotherMeanwhileIsBusy() throws Exception {
    TestServer.Answer started =
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/commands",
            "{\"shell\": \"while [ ! -e /tmp/stdin-go ]; do sleep 0.05; done; wc -c\","
                + " \"keepStdinOpen\": true}");
    assertThat(started.status()).as(started.text()).isEqualTo(201);
    String path = "/v1/sandboxes/" + sandbox + "/commands/" + started.json().get("id").asText();
    // two bodies near the 1 MiB JSON limit: more than the command's buffer, its pipe and the
    // feeding thread's buffer hold together, so the second waits for the command to read
    String big = "{\"data\": \"" + Base64.getEncoder().encodeToString(new byte[700_000]) + "\"}";
    assertThat(writeStdin(path, big).status()).isEqualTo(204);
    CompletableFuture<TestServer.Answer> waiting = new CompletableFuture<>();
    Thread.ofVirtual()
        .start(
            () -> {
              try {
                waiting.complete(writeStdin(path, big));
              } catch (Throwable e) {
                waiting.completeExceptionally(e);
              }
            });
    long written = 1_400_000;
    while (true) {
      TestServer.Answer tiny = writeStdin(path, "{\"data\": \"eA==\"}");
      if (tiny.status() == 409) {
        assertThat(tiny.error().get("code").asText()).isEqualTo("stdin_busy");
        break;
      }
      assertThat(tiny.status()).as(tiny.text()).isEqualTo(204); // before the big one came
      assertThat(waiting).as("a command that does not read holds the write back").isNotDone();
      written++;
      Thread.sleep(20); // a hang is ended by the test's default timeout
    }
    assertThat(waiting).isNotDone();
    s.exec(key, sandbox, "{\"argv\": [\"touch\", \"/tmp/stdin-go\"]}");
    assertThat(waiting.get(60, TimeUnit.SECONDS).status())
        .as("once the command reads, the waiting write is answered")
        .isEqualTo(204);
    assertThat(writeStdin(path, "{\"eof\": true}").status()).isEqualTo(204);
    StringBuilder out = new StringBuilder();
    JsonNode state;
    do {
      Thread.sleep(20); // bounded by the test's default timeout
      state = s.call(key, "GET", path, null).json();
      out.append(new String(Base64.getDecoder().decode(state.get("stdout").asText())));
    } while (state.get("running").asBoolean());
    assertThat(out.toString().strip()).as("every byte arrived").isEqualTo(Long.toString(written));
  }

  private static TestServer.Answer writeStdin(String commandPath, String body) throws Exception {
    return s.call(key, "POST", commandPath + "/stdin", body);
  }

  /** Polls a background command until its stdout so far is {@code expected}; its last state. */
  private static JsonNode awaitStdout(String path, StringBuilder out, String expected)
      throws Exception {
    while (true) {
      JsonNode state = s.call(key, "GET", path, null).json();
      out.append(new String(Base64.getDecoder().decode(state.get("stdout").asText())));
      assertThat(expected).as("stdout so far").startsWith(out.toString());
      if (out.toString().equals(expected)) {
        return state;
      }
      assertThat(state.get("running").asBoolean()).as("still running: " + out).isTrue();
      Thread.sleep(20); // a hang is ended by the test's default timeout
    }
  }

  private static String base64(String text) {
    return Base64.getEncoder().encodeToString(text.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void filesRoundTripStreamedAndReportErrors() throws Exception {
    String base = "/v1/sandboxes/" + sandbox + "/files";
    // 24 MiB, generated while sent: nothing holds it whole on the client either
    long size = 24L << 20;
    MessageDigest sent = MessageDigest.getInstance("SHA-256");
    HttpResponse<byte[]> put =
        s.http.send(
            HttpRequest.newBuilder(s.uri(base + "/content?path=big/data.bin"))
                .header("Authorization", "Bearer " + key)
                .PUT(HttpRequest.BodyPublishers.ofInputStream(() -> new Pattern(size, sent)))
                .build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(put.statusCode()).as(new String(put.body())).isEqualTo(204);
    HttpResponse<InputStream> get =
        s.http.send(
            HttpRequest.newBuilder(s.uri(base + "/content?path=big/data.bin"))
                .header("Authorization", "Bearer " + key)
                .build(),
            HttpResponse.BodyHandlers.ofInputStream());
    assertThat(get.statusCode()).isEqualTo(200);
    MessageDigest got = MessageDigest.getInstance("SHA-256");
    long n = 0;
    try (InputStream in = get.body()) {
      byte[] buf = new byte[65536];
      for (int r; (r = in.read(buf)) > 0; n += r) {
        got.update(buf, 0, r);
      }
    }
    assertThat(n).isEqualTo(size);
    assertThat(HexFormat.of().formatHex(got.digest()))
        .isEqualTo(HexFormat.of().formatHex(sent.digest()));

    JsonNode stat = s.call(key, "GET", base + "/stat?path=big/data.bin", null).json();
    assertThat(stat.get("type").asText()).isEqualTo("FILE");
    assertThat(stat.get("size").asLong()).isEqualTo(size);
    assertThat(stat.get("path").asText()).isEqualTo("/home/sandbox/big/data.bin");

    assertThat(s.call(key, "POST", base + "/mkdir", "{\"path\": \"d/e\"}").status()).isEqualTo(204);
    assertThat(
            s.call(key, "POST", base + "/rename", "{\"from\": \"big/data.bin\", \"to\": \"d/e/f\"}")
                .status())
        .isEqualTo(204);
    JsonNode list = s.call(key, "GET", base + "/list?path=d/e", null).json();
    assertThat(list.get("entries")).hasSize(1);
    assertThat(list.get("entries").get(0).get("name").asText()).isEqualTo("f");
    assertThat(
            s.call(key, "GET", base + "/realpath?path=d/e/../e/f", null)
                .json()
                .get("path")
                .asText())
        .isEqualTo("/home/sandbox/d/e/f");

    TestServer.Answer notEmpty = s.call(key, "POST", base + "/remove", "{\"path\": \"d\"}");
    assertThat(notEmpty.status()).isEqualTo(409);
    assertThat(notEmpty.error().get("code").asText()).isEqualTo("directory_not_empty");
    assertThat(
            s.call(key, "POST", base + "/remove", "{\"path\": \"d\", \"recursive\": true}")
                .status())
        .isEqualTo(204);
    TestServer.Answer missing = s.call(key, "GET", base + "/content?path=d/e/f", null);
    assertThat(missing.status()).isEqualTo(404);
    assertThat(missing.error().get("code").asText()).isEqualTo("no_such_file");
    assertThat(missing.error().get("path").asText()).isEqualTo("/home/sandbox/d/e/f");
    TestServer.Answer isDir = s.call(key, "GET", base + "/content?path=/etc", null);
    assertThat(isDir.status()).isEqualTo(409);
    assertThat(isDir.error().get("code").asText()).isEqualTo("is_directory");
    s.exec(key, sandbox, "{\"argv\": [\"mkfifo\", \"/tmp/fifo\"]}");
    TestServer.Answer fifo = s.call(key, "GET", base + "/content?path=/tmp/fifo", null);
    assertThat(fifo.status()).as(fifo.text()).isEqualTo(409);
    assertThat(fifo.error().get("code").asText()).isEqualTo("file_error");
    assertThat(fifo.error().get("path").asText()).isEqualTo("/tmp/fifo");
    TestServer.Answer denied = s.call(key, "GET", base + "/content?path=/etc/shadow", null);
    assertThat(denied.status()).isEqualTo(403);
    assertThat(denied.error().get("code").asText()).isEqualTo("access_denied");
  }

  @Test
  void everyRequestIsLoggedAsOneJsonLineWithoutTheKey() throws Exception {
    s.call(key, "GET", "/v1/sandboxes/" + sandbox, null);
    // the line is written once the answer is sent: wait for it rather than race it
    JsonNode line = null;
    for (int i = 0; i < 500 && line == null; i++) {
      line =
          s.logLines.stream()
              .map(ServerApiTest::parse)
              .filter(l -> l.get("route").asText().equals("/v1/sandboxes/{id}"))
              .filter(l -> l.get("method").asText().equals("GET"))
              .findFirst()
              .orElse(null);
      Thread.sleep(10);
    }
    assertThat(line).as("a log line for GET /v1/sandboxes/{id}").isNotNull();
    assertThat(s.logLines).noneMatch(l -> l.contains(key));
    assertThat(line.get("org").asText()).isEqualTo("acme");
    assertThat(line.get("sandbox").asText()).isEqualTo(sandbox);
    assertThat(line.get("status").asInt()).isEqualTo(200);
    assertThat(line.has("durationMs")).isTrue();
    assertThat(line.has("time")).isTrue();
  }

  @Test
  void metricsExposeSandboxesRequestsErrorsAndExecLatency() throws Exception {
    s.exec(key, sandbox, "{\"argv\": [\"true\"]}");
    s.call(key, "GET", "/v1/sandboxes/nope", null);
    String metrics = s.call(null, "GET", "/metrics", null).text();
    assertThat(metrics)
        .contains("sandbox4j_server_sandboxes{state=\"running\"}")
        .contains("sandbox4j_server_exec_duration_seconds_count")
        .contains("sandbox4j_server_errors_total{code=\"not_found\"}")
        .contains("sandbox4j_server_requests_total{")
        .doesNotContain(sandbox);
  }

  private static JsonNode parse(String line) {
    try {
      return TestServer.JSON.readTree(line);
    } catch (java.io.IOException e) {
      throw new AssertionError("not JSON: " + line, e);
    }
  }

  static String b64(String s) {
    return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
  }

  /** Deterministic bytes, digested as they are read. */
  static final class Pattern extends InputStream {
    private final long size;
    private final MessageDigest digest;
    private long position;

    Pattern(long size, MessageDigest digest) {
      this.size = size;
      this.digest = digest;
    }

    @Override
    public int read() {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) {
      if (position == size) {
        return -1;
      }
      int n = (int) Math.min(len, size - position);
      for (int i = 0; i < n; i++) {
        b[off + i] = (byte) ((position + i) * 31 >>> 3);
      }
      digest.update(b, off, n);
      position += n;
      return n;
    }
  }

  /** A WebSocket exec client (the JDK's), collecting events. */
  static final class Socket implements WebSocket.Listener {
    final List<JsonNode> events = new CopyOnWriteArrayList<>();
    final CompletableFuture<Integer> closed = new CompletableFuture<>();
    private final StringBuilder partial = new StringBuilder();
    WebSocket socket;

    static Socket open(TestServer s, String key, String id) throws Exception {
      return open(s, key, id, "");
    }

    /** A socket to {@code id}'s exec route with {@code query} (such as "?keepOpen=true"). */
    static Socket open(TestServer s, String key, String id, String query) throws Exception {
      Socket listener = new Socket();
      listener.socket =
          s.http
              .newWebSocketBuilder()
              .header("Authorization", "Bearer " + key)
              .buildAsync(
                  java.net.URI.create(
                      s.server.uri().toString().replace("http:", "ws:")
                          + "/v1/sandboxes/"
                          + id
                          + "/exec"
                          + query),
                  listener)
              .get(30, TimeUnit.SECONDS);
      return listener;
    }

    void send(String text) throws Exception {
      socket.sendText(text, true).get(10, TimeUnit.SECONDS);
    }

    List<JsonNode> events() {
      return events;
    }

    void awaitOutput(String text) throws InterruptedException {
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (!TestServer.stdout(events, "stdout").contains(text)) {
        assertThat(System.nanoTime()).as("waiting for output " + text).isLessThan(deadline);
        Thread.sleep(20);
      }
    }

    @Override
    public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
      partial.append(data);
      if (last) {
        try {
          events.add(TestServer.JSON.readTree(partial.toString()));
        } catch (java.io.IOException e) {
          throw new AssertionError(e);
        }
        partial.setLength(0);
      }
      ws.request(1);
      return null;
    }

    @Override
    public CompletionStage<?> onClose(WebSocket ws, int status, String reason) {
      closed.complete(status);
      return null;
    }

    @Override
    public void onError(WebSocket ws, Throwable error) {
      closed.completeExceptionally(error);
    }
  }
}
