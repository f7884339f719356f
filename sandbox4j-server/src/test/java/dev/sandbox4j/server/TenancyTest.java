package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Organizations see only their own; keys revoke at once; quota and create rate per organization.
 */
class TenancyTest {

  @TempDir Path data;

  /** A body for each route that would succeed for the owner, so that only ownership can refuse. */
  private static final Map<String, String> BODIES =
      Map.of(
          "POST /v1/sandboxes/{id}/exec", "{\"argv\": [\"touch\", \"/tmp/other-was-here\"]}",
          "POST /v1/sandboxes/{id}/commands", "{\"argv\": [\"touch\", \"/tmp/other-was-here\"]}",
          "POST /v1/sandboxes/{id}/fork", "{}",
          "POST /v1/sandboxes/{id}/snapshots", "{\"name\": \"stolen\"}",
          "POST /v1/sandboxes/{id}/files/mkdir", "{\"path\": \"other\"}",
          "POST /v1/sandboxes/{id}/files/remove", "{\"path\": \"secret.txt\"}",
          "POST /v1/sandboxes/{id}/files/rename", "{\"from\": \"secret.txt\", \"to\": \"taken\"}");

  @Test
  void everyEndpointWithAnotherOrganizationsIdIsNotFoundAndChangesNothing() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String a = s.key("org-a");
      String b = s.key("org-b");
      String id = s.create(a, "{\"labels\": {\"owner\": \"a\"}}");
      String files = "/v1/sandboxes/" + id + "/files";
      assertThat(
              s.send(a, "PUT", files + "/content?path=secret.txt", "a's".getBytes(), null)
                  .statusCode())
          .isEqualTo(204);
      String cid =
          s.call(
                  a,
                  "POST",
                  "/v1/sandboxes/" + id + "/commands",
                  "{\"argv\": [\"sleep\", \"1000\"]}")
              .json()
              .get("id")
              .asText();
      assertThat(
              s.call(a, "POST", "/v1/sandboxes/" + id + "/snapshots", "{\"name\": \"base\"}")
                  .status())
          .isEqualTo(201);

      int checked = 0;
      for (String route : s.server.routes()) {
        if (!route.contains("{")) {
          continue;
        }
        String method = route.substring(0, route.indexOf(' '));
        String path =
            route
                .substring(route.indexOf(' ') + 1)
                .replace("{id}", id)
                .replace("{cid}", cid)
                .replace("{name}", "base");
        if (path.contains("/files/") && (method.equals("GET") || method.equals("PUT"))) {
          path += "?path=secret.txt";
        }
        TestServer.Answer answer =
            method.equals("PUT")
                ? answer(s.send(b, method, path, "b's".getBytes(), null))
                : s.call(b, method, path, BODIES.get(route));
        assertThat(answer.status()).as(route + ": " + answer.text()).isEqualTo(404);
        assertThat(answer.error().get("code").asText()).as(route).isEqualTo("not_found");
        checked++;
      }
      assertThat(checked).isGreaterThanOrEqualTo(20);

      // nothing changed for a, and b sees nothing of a
      assertThat(s.call(a, "GET", files + "/content?path=secret.txt", null).text())
          .isEqualTo("a's");
      assertThat(s.call(a, "GET", files + "/stat?path=/tmp/other-was-here", null).status())
          .isEqualTo(404);
      assertThat(s.call(a, "GET", files + "/stat?path=other", null).status()).isEqualTo(404);
      JsonNode sandbox = s.call(a, "GET", "/v1/sandboxes/" + id, null).json();
      assertThat(sandbox.get("state").asText()).isEqualTo("running");
      assertThat(
              s.call(a, "GET", "/v1/sandboxes/" + id + "/commands/" + cid, null)
                  .json()
                  .get("running")
                  .asBoolean())
          .isTrue();
      assertThat(s.call(a, "GET", "/v1/snapshots", null).json().get("items"))
          .extracting(n -> n.get("name").asText())
          .containsExactly("base");
      assertThat(s.call(b, "GET", "/v1/sandboxes", null).json().get("items")).isEmpty();
      assertThat(s.call(b, "GET", "/v1/snapshots", null).json().get("items")).isEmpty();
      assertThat(s.call(a, "GET", "/v1/sandboxes", null).json().get("items")).hasSize(1);

      // snapshot names are per organization: b may have its own "base", apart from a's
      String bs = s.create(b, "{}");
      assertThat(
              s.call(b, "POST", "/v1/sandboxes/" + bs + "/snapshots", "{\"name\": \"base\"}")
                  .status())
          .isEqualTo(201);
      assertThat(s.call(b, "DELETE", "/v1/snapshots/base", null).status()).isEqualTo(204);
      assertThat(s.call(a, "GET", "/v1/snapshots", null).json().get("items")).hasSize(1);
      assertThat(s.call(a, "DELETE", "/v1/snapshots/base", null).status()).isEqualTo(204);
    }
  }

  private static TestServer.Answer answer(java.net.http.HttpResponse<byte[]> r) {
    return new TestServer.Answer(r.statusCode(), r.body(), r.headers().map());
  }

  @Test
  void aRevokedKeyIsRefusedOnTheNextRequest() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String kept = s.key("org-r");
      String revoked;
      String revokedId;
      try (ServerKeys keys = ServerKeys.open(data)) {
        ServerKeys.CreatedKey k = keys.create("org-r");
        revoked = k.key();
        revokedId = k.id();
        assertThat(k.toString()).doesNotContain(revoked);
        assertThat(keys.list())
            .anyMatch(
                i ->
                    i.id().equals(revokedId)
                        && i.revoked() == null
                        && revoked.startsWith(i.prefix()));
      }
      assertThat(s.call(revoked, "GET", "/v1/sandboxes", null).status()).isEqualTo(200);
      try (ServerKeys keys = ServerKeys.open(data)) { // another connection, as the CLI would
        assertThat(keys.revoke(revokedId)).isTrue();
        assertThat(keys.revoke(revokedId)).isFalse();
        assertThat(keys.list()).anyMatch(i -> i.id().equals(revokedId) && i.revoked() != null);
      }
      TestServer.Answer refused = s.call(revoked, "GET", "/v1/sandboxes", null);
      // by prefix, as keys ls shows it
      String third;
      try (ServerKeys keys = ServerKeys.open(data)) {
        ServerKeys.CreatedKey k = keys.create("org-r");
        third = k.key();
        assertThat(s.call(third, "GET", "/v1/sandboxes", null).status()).isEqualTo(200);
        assertThat(keys.revoke(k.prefix())).isTrue();
      }
      assertThat(s.call(third, "GET", "/v1/sandboxes", null).status()).isEqualTo(401);
      assertThat(refused.status()).isEqualTo(401);
      assertThat(refused.error().get("code").asText()).isEqualTo("unauthenticated");
      assertThat(s.call(kept, "GET", "/v1/sandboxes", null).status()).isEqualTo(200);
    }
  }

  @Test
  void theDatabaseKeepsOnlyHashesOfKeys() throws Exception {
    String key;
    try (ServerKeys keys = ServerKeys.open(data)) {
      key = keys.create("org-h").key();
    }
    assertThat(key).startsWith("s4j_").hasSizeGreaterThanOrEqualTo(4 + 43);
    for (Path f : List.of(data.resolve("server.db"), data.resolve("server.db-wal"))) {
      if (java.nio.file.Files.exists(f)) {
        assertThat(new String(java.nio.file.Files.readAllBytes(f), StandardCharsets.ISO_8859_1))
            .doesNotContain(key.substring(4));
      }
    }
  }

  @Test
  void theConcurrentSandboxQuotaIsPerOrganization() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.maxSandboxesPerOrganization(2))) {
      String a = s.key("quota-a");
      String b = s.key("quota-b");
      String first = s.create(a, "{}");
      s.create(a, "{}");
      TestServer.Answer over = s.call(a, "POST", "/v1/sandboxes", "{}");
      assertThat(over.status()).isEqualTo(429);
      assertThat(over.error().get("code").asText()).isEqualTo("quota_exceeded");
      TestServer.Answer fork =
          s.call(a, "POST", "/v1/sandboxes/" + first + "/fork", "{\"filesOnly\": true}");
      assertThat(fork.status()).isEqualTo(429);
      s.create(b, "{}"); // another organization is not affected
      assertThat(s.call(a, "DELETE", "/v1/sandboxes/" + first, null).status()).isEqualTo(204);
      s.create(a, "{}");
    }
  }

  @Test
  void concurrentCreatesCannotOvershootTheQuota() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.maxSandboxesPerOrganization(3))) {
      String a = s.key("quota-c");
      java.util.Queue<TestServer.Answer> answers =
          new java.util.concurrent.ConcurrentLinkedQueue<>();
      List<Thread> clients = new java.util.ArrayList<>();
      for (int i = 0; i < 6; i++) {
        clients.add(
            Thread.ofVirtual()
                .start(
                    () -> {
                      try {
                        answers.add(s.call(a, "POST", "/v1/sandboxes", "{}"));
                      } catch (Exception e) {
                        throw new AssertionError(e);
                      }
                    }));
      }
      for (Thread t : clients) {
        t.join();
      }
      for (TestServer.Answer answer : answers) {
        if (answer.status() == 201) {
          s.track(answer.json().get("id").asText());
        }
      }
      assertThat(answers).hasSize(6);
      assertThat(answers).filteredOn(x -> x.status() == 201).hasSize(3);
      assertThat(answers).filteredOn(x -> x.status() == 429).hasSize(3);
      assertThat(s.call(a, "GET", "/v1/sandboxes", null).json().get("items")).hasSize(3);
    }
  }

  @Test
  void backgroundCommandsNotYetCollectedAreBoundedPerOrganization() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.requestLog(l -> {}))) {
      String a = s.key("bg-a");
      String b = s.key("bg-b");
      String id = s.create(a, "{}");
      String path = "/v1/sandboxes/" + id + "/commands";
      String first = null;
      for (int i = 0; i < ApiServlet.MAX_COMMANDS_PER_ORGANIZATION; i++) {
        TestServer.Answer started = s.call(a, "POST", path, "{\"argv\": [\"sleep\", \"1000\"]}");
        assertThat(started.status()).as(started.text()).isEqualTo(201);
        if (first == null) {
          first = started.json().get("id").asText();
        }
      }
      TestServer.Answer over = s.call(a, "POST", path, "{\"argv\": [\"true\"]}");
      assertThat(over.status()).isEqualTo(429);
      assertThat(over.error().get("code").asText()).isEqualTo("quota_exceeded");
      String other = s.create(b, "{}");
      assertThat(
              s.call(b, "POST", "/v1/sandboxes/" + other + "/commands", "{\"argv\": [\"true\"]}")
                  .status())
          .isEqualTo(201);
      assertThat(s.call(a, "POST", path + "/" + first + "/stop", null).status()).isEqualTo(200);
      assertThat(s.call(a, "POST", path, "{\"argv\": [\"true\"]}").status()).isEqualTo(201);
    }
  }

  @Test
  void createIsRateLimitedPerOrganizationWithRetryAfter() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.createRateLimit(1, Duration.ofHours(1)))) {
      String a = s.key("rate-a");
      String b = s.key("rate-b");
      s.create(a, "{}");
      TestServer.Answer limited = s.call(a, "POST", "/v1/sandboxes", "{}");
      assertThat(limited.status()).isEqualTo(429);
      assertThat(limited.error().get("code").asText()).isEqualTo("rate_limited");
      assertThat(Long.parseLong(limited.headers().get("retry-after").getFirst()))
          .isBetween(1L, 3600L);
      s.create(b, "{}");
    }
  }
}
