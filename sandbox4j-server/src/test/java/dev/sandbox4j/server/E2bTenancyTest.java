package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The E2B routes (control plane and envd) keep organizations apart in every state a sandbox can be
 * in, as {@code TenancyTest} checks for {@code /v1}: organization a's sandbox fresh, its fork,
 * while paused, after a connect resumed it, and a sandbox made from its snapshot. Organization b,
 * with a valid key and a valid envd token of its own sandbox, reaches none of them: every
 * control-plane route answers 404 as for an id that never existed, every envd route is
 * unauthenticated, and a's sandboxes, files and snapshot are as they were afterwards.
 */
class E2bTenancyTest {
  @TempDir Path data;

  private static final String SECRET = "a's secret";

  /** Control-plane routes on one sandbox, with a body that would be valid from its owner. */
  private static final Map<String, String> BY_ID =
      Map.of(
          "GET /sandboxes/{id}", "",
          "POST /sandboxes/{id}/timeout", "{\"timeout\": 1}",
          "POST /sandboxes/{id}/pause", "",
          "POST /sandboxes/{id}/fork", "{}",
          "POST /sandboxes/{id}/snapshots", "{\"name\": \"stolen\"}",
          "GET /sandboxes/{id}/metrics", "",
          "POST /v2/sandboxes/{id}/connect", "{\"timeout\": 300}",
          "DELETE /sandboxes/{id}", "");

  @Test
  void anotherOrganizationReachesNoneOfTheE2bRoutesOfASandboxInAnyState() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String a = s.key("org-a");
      String b = s.key("org-b");
      JsonNode own = create(s, b, "base");
      String bToken = own.get("envdAccessToken").asText();

      JsonNode fresh = create(s, a, "base");
      String id = fresh.get("sandboxID").asText();
      String token = fresh.get("envdAccessToken").asText();
      assertThat(upload(s, id, token, "/home/user/secret.txt", SECRET)).isEqualTo(200);

      Map<String, String> states = new LinkedHashMap<>(); // state -> sandbox id
      Map<String, String> tokens = new LinkedHashMap<>(); // sandbox id -> a's envd token
      states.put("fresh", id);
      tokens.put(id, token);
      attackAll(s, b, bToken, "fresh", id);

      Call fork = e2b(s, a, "POST", "/sandboxes/" + id + "/fork", "{}");
      assertThat(fork.status()).as(fork.text()).isEqualTo(201);
      JsonNode child = fork.json().get(0).get("sandbox");
      s.track(child.get("sandboxID").asText());
      states.put("forked", child.get("sandboxID").asText());
      tokens.put(child.get("sandboxID").asText(), child.get("envdAccessToken").asText());
      attackAll(s, b, bToken, "forked", child.get("sandboxID").asText());

      Call pause = e2b(s, a, "POST", "/sandboxes/" + id + "/pause", "");
      assertThat(pause.status()).as(pause.text()).isEqualTo(204);
      attackAll(s, b, bToken, "paused", id);
      Call resume = e2b(s, a, "POST", "/v2/sandboxes/" + id + "/connect", "{\"timeout\": 300}");
      assertThat(resume.status()).as(resume.text()).isIn(200, 201);
      attackAll(s, b, bToken, "resumed", id);

      Call snapshot = e2b(s, a, "POST", "/sandboxes/" + id + "/snapshots", "{\"name\": \"kept\"}");
      assertThat(snapshot.status()).as(snapshot.text()).isEqualTo(201);
      Call theirs = e2b(s, b, "POST", "/v2/sandboxes", "{\"templateID\": \"kept\"}");
      assertThat(theirs.status())
          .as("b creating from a's snapshot: " + theirs.text())
          .isEqualTo(404);
      assertThat(e2b(s, b, "GET", "/snapshots", null).json()).as("b's snapshots").isEmpty();
      assertThat(e2b(s, b, "DELETE", "/templates/kept", null).status())
          .as("b deleting a's snapshot")
          .isEqualTo(404);
      JsonNode restored = create(s, a, "kept");
      String restoredId = restored.get("sandboxID").asText();
      states.put("from a snapshot", restoredId);
      tokens.put(restoredId, restored.get("envdAccessToken").asText());
      attackAll(s, b, bToken, "from a snapshot", restoredId);

      // nothing b tried changed anything of a's
      JsonNode listed = e2b(s, a, "GET", "/v2/sandboxes", null).json();
      List<String> ids = listed.findValuesAsText("sandboxID");
      assertThat(ids).as("a's sandboxes").containsAll(states.values());
      assertThat(e2b(s, b, "GET", "/v2/sandboxes", null).json().findValuesAsText("sandboxID"))
          .as("b lists its own sandbox only")
          .containsExactly(own.get("sandboxID").asText());
      assertThat(e2b(s, a, "GET", "/snapshots", null).json().findValuesAsText("snapshotID"))
          .containsExactly("kept");
      for (Map.Entry<String, String> state : states.entrySet()) {
        String sandbox = state.getValue();
        HttpResponse<byte[]> read = download(s, sandbox, tokens.get(sandbox), "secret.txt");
        assertThat(read.statusCode()).as(state.getKey() + ": a reads its file").isEqualTo(200);
        assertThat(new String(read.body(), StandardCharsets.UTF_8))
            .as(state.getKey())
            .isEqualTo(SECRET);
      }
    }
  }

  /** Every by-id route of the control plane and of envd, as b, on a's sandbox {@code id}. */
  private static void attackAll(TestServer s, String bKey, String bToken, String state, String id)
      throws Exception {
    for (Map.Entry<String, String> route : BY_ID.entrySet()) {
      String method = route.getKey().substring(0, route.getKey().indexOf(' '));
      String path = route.getKey().substring(method.length() + 1).replace("{id}", id);
      Call answer =
          e2b(s, bKey, method, path, route.getValue().isEmpty() ? null : route.getValue());
      assertThat(answer.status())
          .as("%s: b's %s on a's sandbox: %s", state, route.getKey(), answer.text())
          .isEqualTo(404);
    }
    // envd: b's valid token is for b's sandbox only; no token, or a made-up one, is refused alike
    for (String token : new String[] {bToken, null, bToken.substring(0, bToken.indexOf('.'))}) {
      String as = token == null ? "no token" : token.equals(bToken) ? "b's token" : "b's org id";
      HttpResponse<byte[]> read = download(s, id, token, "/home/user/secret.txt");
      assertThat(read.statusCode()).as("%s: GET /files with %s", state, as).isEqualTo(401);
      assertThat(new String(read.body(), StandardCharsets.UTF_8)).doesNotContain(SECRET);
      assertThat(upload(s, id, token, "/home/user/secret.txt", "b's")).isEqualTo(401);
      HttpResponse<byte[]> stat =
          s.http.send(
              envd(s, "/filesystem.Filesystem/Stat", id, token)
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString("{\"path\": \"/home/user\"}"))
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());
      assertThat(stat.statusCode()).as("%s: Filesystem/Stat with %s", state, as).isEqualTo(401);
      assertThat(new String(stat.body(), StandardCharsets.UTF_8)).contains("unauthenticated");
      HttpResponse<byte[]> envs =
          s.http.send(
              envd(s, "/envs", id, token).GET().build(), HttpResponse.BodyHandlers.ofByteArray());
      assertThat(envs.statusCode()).as("%s: GET /envs with %s", state, as).isEqualTo(401);
    }
  }

  private static JsonNode create(TestServer s, String key, String template) throws Exception {
    Call created = e2b(s, key, "POST", "/v2/sandboxes", "{\"templateID\": \"" + template + "\"}");
    assertThat(created.status()).as(created.text()).isEqualTo(201);
    JsonNode sandbox = created.json();
    s.track(sandbox.get("sandboxID").asText());
    return sandbox;
  }

  private static HttpRequest.Builder envd(TestServer s, String path, String id, String token) {
    HttpRequest.Builder r = HttpRequest.newBuilder(s.uri("/e2b/envd" + path));
    r.header("E2b-Sandbox-Id", id);
    if (token != null) {
      r.header("X-Access-Token", token);
    }
    return r;
  }

  private static int upload(TestServer s, String id, String token, String path, String content)
      throws Exception {
    return s.http
        .send(
            envd(s, "/files?path=" + path + "&username=user", id, token)
                .header("Content-Type", "application/octet-stream")
                .POST(HttpRequest.BodyPublishers.ofString(content))
                .build(),
            HttpResponse.BodyHandlers.ofByteArray())
        .statusCode();
  }

  private static HttpResponse<byte[]> download(TestServer s, String id, String token, String path)
      throws Exception {
    return s.http.send(
        envd(s, "/files?path=" + path + "&username=user", id, token).GET().build(),
        HttpResponse.BodyHandlers.ofByteArray());
  }

  private record Call(int status, byte[] body) {
    String text() {
      return new String(body, StandardCharsets.UTF_8);
    }

    JsonNode json() throws java.io.IOException {
      return TestServer.JSON.readTree(body);
    }
  }

  private static Call e2b(TestServer s, String key, String method, String path, String json)
      throws Exception {
    HttpRequest.Builder r = HttpRequest.newBuilder(s.uri("/e2b" + path)).header("X-API-Key", key);
    if (json != null) {
      r.header("Content-Type", "application/json");
    }
    r.method(
        method,
        json == null
            ? HttpRequest.BodyPublishers.noBody()
            : HttpRequest.BodyPublishers.ofString(json));
    HttpResponse<byte[]> response = s.http.send(r.build(), HttpResponse.BodyHandlers.ofByteArray());
    return new Call(response.statusCode(), response.body());
  }
}
