package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile and careless input: each is a 4xx JSON error naming what was wrong, and changes nothing.
 */
class BadInputTest {

  @TempDir static Path data;
  static TestServer s;
  static String key;
  static String sandbox;

  @BeforeAll
  static void start() throws Exception {
    TestServer.requireLocalEngine();
    s = new TestServer(data);
    key = s.key("bad-input");
    sandbox = s.create(key, "{}");
  }

  @AfterAll
  static void stop() {
    if (s != null) {
      s.close();
    }
  }

  private static void assertError(TestServer.Answer a, int status, String code, String field)
      throws Exception {
    assertThat(a.status()).as(a.text()).isEqualTo(status);
    assertThat(a.headers().get("content-type")).anyMatch(t -> t.startsWith("application/json"));
    assertThat(a.error().get("code").asText()).as(a.text()).isEqualTo(code);
    assertThat(a.error().get("message").asText()).isNotBlank();
    if (field != null) {
      assertThat(a.error().path("field").asText()).as(a.text()).isEqualTo(field);
    }
  }

  @Test
  void malformedJsonIsAnInvalidRequest() throws Exception {
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"labels\": "), 400, "invalid_request", null);
    assertError(s.call(key, "POST", "/v1/sandboxes", "[1, 2]"), 400, "invalid_request", null);
    assertError(s.call(key, "POST", "/v1/sandboxes", "{} {}"), 400, "invalid_request", null);
    assertError(s.call(key, "POST", "/v1/sandboxes", ""), 400, "invalid_request", null);
  }

  @Test
  void unknownFieldsAreNamed() throws Exception {
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"colour\": \"red\"}"),
        400,
        "invalid_request",
        "colour");
    assertError(
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/exec",
            "{\"argv\": [\"true\"], \"timeout\": 5}"),
        400,
        "invalid_request",
        "timeout");
    assertError(
        s.call(key, "GET", "/v1/sandboxes?colour=red", null), 400, "invalid_request", "colour");
  }

  @Test
  void badValuesAreNamed() throws Exception {
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"cpus\": \"many\"}"),
        400,
        "invalid_request",
        "cpus");
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"cpus\": 3}"), 400, "invalid_request", "cpus");
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"labels\": {\"a b\": \"c\"}}"),
        400,
        "invalid_request",
        "labels");
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"workingDirectory\": \"../x\"}"),
        400,
        "invalid_request",
        "workingDirectory");
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"deleteAfter\": \"tomorrow\"}"),
        400,
        "invalid_request",
        "deleteAfter");
    String exec = "/v1/sandboxes/" + sandbox + "/exec";
    assertError(
        s.call(key, "POST", exec, "{\"argv\": [\"a\"], \"shell\": \"b\"}"),
        400,
        "invalid_request",
        "shell");
    assertError(s.call(key, "POST", exec, "{\"env\": {}}"), 400, "invalid_request", "argv");
    assertError(s.call(key, "POST", exec, "{\"argv\": []}"), 400, "invalid_request", "argv");
    assertError(
        s.call(key, "POST", exec, "{\"argv\": [\"true\"], \"stdin\": \"%%%\"}"),
        400,
        "invalid_request",
        "stdin");
  }

  @Test
  void negativeTimeoutsAreRefused() throws Exception {
    assertError(
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/exec",
            "{\"argv\": [\"true\"], \"timeoutMs\": -1}"),
        400,
        "invalid_request",
        "timeoutMs");
    assertError(
        s.call(
            key,
            "POST",
            "/v1/sandboxes/" + sandbox + "/commands",
            "{\"argv\": [\"true\"], \"timeoutMs\": -1}"),
        400,
        "invalid_request",
        "timeoutMs");
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"idleTimeoutMs\": -5}"),
        400,
        "invalid_request",
        "idleTimeoutMs");
    assertError(
        s.call(key, "POST", "/v1/sandboxes", "{\"sandboxTimeoutMs\": -5}"),
        400,
        "invalid_request",
        "sandboxTimeoutMs");
  }

  @Test
  void oversizedBodiesAre413() throws Exception {
    byte[] big =
        ("{\"labels\": {\"a\": \"" + "x".repeat(2 << 20) + "\"}}").getBytes(StandardCharsets.UTF_8);
    var r = s.send(key, "POST", "/v1/sandboxes", big, "application/json");
    assertThat(r.statusCode()).isEqualTo(413);
    assertThat(new String(r.body(), StandardCharsets.UTF_8)).contains("\"too_large\"");
  }

  @Test
  void unknownSandboxIdsAreNotFound() throws Exception {
    // the cloud providers' id forms pass the pattern and are still only ids the org owns; the
    // rest never reach a lookup
    for (String id :
        List.of(
            "nope",
            "0000000000000000",
            "A-B",
            "x".repeat(40),
            "sb-AbC_1.2",
            "a..b",
            "x".repeat(128),
            "x".repeat(129),
            "..",
            ".a",
            "-a")) {
      assertError(s.call(key, "GET", "/v1/sandboxes/" + id, null), 404, "not_found", null);
      assertError(
          s.call(key, "POST", "/v1/sandboxes/" + id + "/exec", "{\"argv\": [\"true\"]}"),
          404,
          "not_found",
          null);
    }
  }

  @Test
  void anEncodedSeparatorInASandboxIdIsRefusedBeforeAnyRoute() throws Exception {
    assertError(s.call(key, "GET", "/v1/sandboxes/a%2f..%2fb", null), 400, "invalid_request", null);
  }

  @Test
  void badLimitsAndCursorsAreNamed() throws Exception {
    for (String limit : List.of("0", "501", "abc", "-1", "1.5")) {
      assertError(
          s.call(key, "GET", "/v1/sandboxes?limit=" + limit, null),
          400,
          "invalid_request",
          "limit");
    }
    for (String cursor : List.of("%25%25", "Li4v", "bm9wZSE")) {
      assertError(
          s.call(key, "GET", "/v1/sandboxes?cursor=" + cursor, null),
          400,
          "invalid_request",
          "cursor");
    }
    assertError(
        s.call(key, "GET", "/v1/sandboxes?state=dancing", null), 400, "invalid_request", "state");
    assertError(
        s.call(key, "GET", "/v1/sandboxes?label=novalue", null), 400, "invalid_request", "label");
  }

  @Test
  void badPathsAreNamed() throws Exception {
    String base = "/v1/sandboxes/" + sandbox + "/files";
    assertError(s.call(key, "GET", base + "/stat", null), 400, "invalid_request", "path");
    assertError(s.call(key, "GET", base + "/stat?path=", null), 400, "invalid_request", "path");
    assertError(
        s.call(key, "GET", base + "/stat?path=a%00b", null), 400, "invalid_request", "path");
    assertError(
        s.call(key, "GET", base + "/stat?path=" + "a".repeat(4097), null),
        400,
        "invalid_request",
        "path");
    // 4095 bytes, 12 KiB percent-encoded: within the API's limit, so the engine answers
    String longest = "/" + java.net.URLEncoder.encode("é".repeat(2047), StandardCharsets.UTF_8);
    TestServer.Answer engineSays = s.call(key, "GET", base + "/stat?path=" + longest, null);
    assertThat(engineSays.status()).as(engineSays.text()).isIn(404, 409);
    assertThat(engineSays.error().get("code").asText()).isIn("no_such_file", "file_error");
    String tooLong = java.net.URLEncoder.encode("é".repeat(2049), StandardCharsets.UTF_8);
    assertError(
        s.call(key, "GET", base + "/stat?path=" + tooLong, null), 400, "invalid_request", "path");
    assertError(
        s.call(key, "POST", base + "/mkdir", "{\"path\": \"\"}"), 400, "invalid_request", "path");
    assertError(
        s.call(key, "POST", base + "/rename", "{\"from\": \"a\"}"), 400, "invalid_request", "to");
  }

  @Test
  void pathTraversalNeverReachesAHostFile() throws Exception {
    Path marker = Path.of("/tmp", "s4j-marker-" + UUID.randomUUID());
    Files.writeString(marker, "host secret");
    try {
      String base = "/v1/sandboxes/" + sandbox + "/files";
      String up = "../../../../../../.." + marker;
      for (String p : List.of(up, marker.toString())) {
        TestServer.Answer read = s.call(key, "GET", base + "/content?path=" + p, null);
        assertThat(read.text()).doesNotContain("host secret");
        assertError(read, 404, "no_such_file", null);
        assertThat(
                s.send(key, "PUT", base + "/content?path=" + p, "sandbox bytes".getBytes(), null)
                    .statusCode())
            .isEqualTo(204);
        assertThat(Files.readString(marker)).isEqualTo("host secret");
        // the write landed inside the sandbox, at the path the sandbox resolves
        assertThat(s.call(key, "GET", base + "/content?path=" + marker, null).text())
            .isEqualTo("sandbox bytes");
        s.call(key, "POST", base + "/remove", "{\"path\": \"" + marker + "\"}");
      }
      String hostHostname = Files.readString(Path.of("/etc/hostname"));
      TestServer.Answer hostname =
          s.call(key, "GET", base + "/content?path=../../../../etc/hostname", null);
      assertThat(hostname.status()).isIn(200, 404);
      if (hostname.status() == 200) {
        assertThat(hostname.text())
            .isEqualTo(
                TestServer.stdout(
                    s.exec(key, sandbox, "{\"argv\": [\"cat\", \"/etc/hostname\"]}"), "stdout"));
      }
      assertThat(Files.readString(Path.of("/etc/hostname"))).isEqualTo(hostHostname);
    } finally {
      Files.deleteIfExists(marker);
    }
  }

  @Test
  void wrongMethodsAndRoutes() throws Exception {
    assertError(s.call(key, "PATCH", "/v1/sandboxes", null), 405, "method_not_allowed", null);
    assertError(s.call(key, "GET", "/v1/nothing", null), 404, "not_found", null);
    assertError(
        s.call(key, "GET", "/v1/sandboxes/" + sandbox + "/exec", null),
        400,
        "invalid_request",
        null);
  }
}
