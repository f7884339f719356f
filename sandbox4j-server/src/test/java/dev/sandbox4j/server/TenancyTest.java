package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Organizations see only their own; keys revoke at once; quota and create rate per organization.
 */
public class TenancyTest {

  @TempDir Path data;

  /** A body for each route that would succeed for the owner, so that only ownership can refuse. */
  private static final Map<String, String> BODIES =
      Map.of(
          "POST /v1/sandboxes/{id}/exec", "{\"argv\": [\"touch\", \"/tmp/other-was-here\"]}",
          "POST /v1/sandboxes/{id}/commands", "{\"argv\": [\"touch\", \"/tmp/other-was-here\"]}",
          "POST /v1/sandboxes/{id}/commands/{cid}/stdin", "{\"data\": \"eA==\", \"eof\": true}",
          "POST /v1/sandboxes/{id}/fork", "{}",
          "POST /v1/sandboxes/{id}/snapshots", "{\"name\": \"stolen\"}",
          "POST /v1/sandboxes/{id}/files/mkdir", "{\"path\": \"other\"}",
          "POST /v1/sandboxes/{id}/files/remove", "{\"path\": \"secret.txt\"}",
          "POST /v1/sandboxes/{id}/files/rename", "{\"from\": \"secret.txt\", \"to\": \"taken\"}",
          "PUT /v1/sandboxes/{id}/egress", "{\"mode\": \"none\"}");

  /** What organization b does to one route, and what it must see. */
  @FunctionalInterface
  private interface Attack {
    void run() throws Exception;
  }

  /**
   * Every route of the server, called by organization b with organization a's sandbox id, command
   * id, snapshot name, the snapshot's name inside the engine, and an image on the host that the
   * operator did not publish: each is the same 404 as a name that does not exist, or (listings)
   * shows nothing of a's; afterwards a's sandbox, files, command and snapshot are as they were, and
   * the engine has no new sandbox or image. The routes come from the server's route table: a route
   * this test does not attack fails it.
   */
  @Test
  void everyRouteWithAnotherOrganizationsNamesIsNotFoundAndChangesNothing() throws Exception {
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
      WorkspaceRef ref = new WorkspaceRef(LocalSandbox.NAME, id);
      // what an attacker guesses: the name the engine stores a's snapshot under, an image on the
      // host the operator never published, and one that does not exist
      String stored =
          s.engine.snapshots().stream()
              .filter(i -> i.source().equals(ref) && i.name().endsWith("-base"))
              .map(SnapshotInfo::name)
              .findFirst()
              .orElseThrow();
      String unpublished = "private-" + Long.toHexString(System.nanoTime());
      s.engine.snapshot(ref, unpublished);
      try {
        String own = s.create(b, "{}"); // b's own sandbox, to pair with a's command id
        Set<String> sandboxesBefore = ids(s.engine);
        Set<String> imagesBefore = images(s.engine);

        Map<String, Attack> attacks = new TreeMap<>();
        // routes without a tenant's data
        attacks.put(
            "GET /healthz",
            () -> assertThat(s.call(b, "GET", "/healthz", null).text()).isEqualTo("ok"));
        attacks.put(
            "GET /metrics",
            () ->
                assertThat(s.call(b, "GET", "/metrics", null).text())
                    .doesNotContain(id, stored, "org-a"));
        attacks.put(
            "GET /v1/openapi.json",
            () -> assertThat(s.call(b, "GET", "/v1/openapi.json", null).status()).isEqualTo(200));
        // collections: b's own, never a's
        attacks.put(
            "GET /v1/sandboxes",
            () -> {
              assertThat(s.call(b, "GET", "/v1/sandboxes", null).json().get("items"))
                  .extracting(n -> n.get("id").asText())
                  .containsExactly(own);
              assertThat(s.call(b, "GET", "/v1/sandboxes?label=owner=a", null).json().get("items"))
                  .isEmpty();
            });
        attacks.put(
            "GET /v1/snapshots",
            () ->
                assertThat(s.call(b, "GET", "/v1/snapshots", null).json().get("items")).isEmpty());
        attacks.put(
            "GET /v1/images",
            () ->
                assertThat(s.call(b, "GET", "/v1/images", null).json().get("items"))
                    .extracting(n -> n.get("name").asText())
                    .doesNotContain(stored, unpublished)
                    .allMatch(n -> n.equals("default")));
        attacks.put(
            "POST /v1/sandboxes",
            () -> {
              // not b's, and does not exist: one answer, whose message differs only by the name
              Set<String> shapes = new java.util.HashSet<>();
              for (String image :
                  List.of(stored, unpublished, "no-such-image", "../images/default")) {
                TestServer.Answer answer =
                    s.call(b, "POST", "/v1/sandboxes", "{\"image\": \"" + image + "\"}");
                assertNotFound(answer, "image " + image);
                assertThat(answer.error().get("field").asText()).isEqualTo("image");
                shapes.add(answer.error().get("message").asText().replace(image, "NAME"));
              }
              assertThat(shapes).hasSize(1);
              shapes.clear();
              for (String snapshot : List.of("base", stored, "no-such-snapshot")) {
                TestServer.Answer answer =
                    s.call(b, "POST", "/v1/sandboxes", "{\"snapshot\": \"" + snapshot + "\"}");
                assertNotFound(answer, "snapshot " + snapshot);
                assertThat(answer.error().get("field").asText()).isEqualTo("snapshot");
                shapes.add(answer.error().get("message").asText().replace(snapshot, "NAME"));
              }
              assertThat(shapes).hasSize(1);
            });
        attacks.put(
            "DELETE /v1/snapshots/{name}",
            () -> {
              for (String name : List.of("base", stored, unpublished)) {
                assertNotFound(s.call(b, "DELETE", "/v1/snapshots/" + name, null), name);
              }
            });
        // a's sandbox and command ids, on every route that takes them; a's command id on b's own
        // sandbox too
        for (String route : s.server.routes()) {
          if (route.contains("{id}")) {
            attacks.put(
                route,
                () -> {
                  attackById(s, b, route, id, cid);
                  if (route.contains("{cid}")) {
                    attackById(s, b, route, own, cid);
                  }
                });
          }
        }
        // servlets mounted behind the key check: /mcp acts in ?sandbox=ID of the caller's only
        attacks.put(
            "MOUNT /mcp/*",
            () -> {
              for (String method : List.of("GET", "POST")) {
                assertNotFound(
                    s.call(
                        b,
                        method,
                        "/mcp?sandbox=" + id,
                        method.equals("POST")
                            ? "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"
                            : null),
                    "/mcp " + method);
              }
            });
        Set<String> surface = new TreeSet<>(s.server.routes());
        s.server.mounts().forEach(m -> surface.add("MOUNT " + m));
        assertThat(attacks.keySet())
            .as("every route and mounted servlet of the server, and only those, is attacked")
            .isEqualTo(surface);
        for (Map.Entry<String, Attack> attack : attacks.entrySet()) {
          try {
            attack.getValue().run();
          } catch (AssertionError e) {
            throw new AssertionError(attack.getKey() + ": " + e.getMessage(), e);
          }
        }

        // nothing changed for a, and nothing new on the host
        assertThat(ids(s.engine)).isEqualTo(sandboxesBefore);
        assertThat(images(s.engine)).isEqualTo(imagesBefore);
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
        assertThat(s.call(a, "GET", "/v1/sandboxes", null).json().get("items")).hasSize(1);
        assertThat(s.engine.egress(ref))
            .as("b's PUT egress changed nothing")
            .isEqualTo(dev.sandbox4j.runtime.EgressPolicy.all());

        // snapshot names are per organization: b may have its own "base", apart from a's
        String bs = own;
        assertThat(
                s.call(b, "POST", "/v1/sandboxes/" + bs + "/snapshots", "{\"name\": \"base\"}")
                    .status())
            .isEqualTo(201);
        assertThat(s.call(b, "DELETE", "/v1/snapshots/base", null).status()).isEqualTo(204);
        assertThat(s.call(a, "GET", "/v1/snapshots", null).json().get("items")).hasSize(1);
        assertThat(s.call(a, "DELETE", "/v1/snapshots/base", null).status()).isEqualTo(204);
      } finally {
        s.engine.removeSnapshot(unpublished);
        s.engine.removeSnapshot(stored);
      }
    }
  }

  /**
   * Organization b calls {@code route} with a's sandbox {@code id} (and command {@code cid}), a
   * file {@code secret.txt} on the file routes, and a body that a's own call would succeed with:
   * the answer must be a 404. Also run on a server on docker (the CLI's DockerServerTest).
   */
  public static void attackById(TestServer s, String b, String route, String id, String cid)
      throws Exception {
    String method = route.substring(0, route.indexOf(' '));
    String path = route.substring(route.indexOf(' ') + 1).replace("{id}", id).replace("{cid}", cid);
    if (path.contains("/files/") && (method.equals("GET") || method.equals("PUT"))) {
      path += "?path=secret.txt";
    }
    // a valid body: the refusal must come from whose sandbox it is, not from the body
    TestServer.Answer answer =
        route.equals("PUT /v1/sandboxes/{id}/files/content")
            ? answer(s.send(b, method, path, "b's".getBytes(), null))
            : s.call(b, method, path, BODIES.get(route));
    assertNotFound(answer, route);
  }

  private static void assertNotFound(TestServer.Answer answer, String what) throws Exception {
    assertThat(answer.status()).as(what + ": " + answer.text()).isEqualTo(404);
    assertThat(answer.error().get("code").asText()).as(what).isEqualTo("not_found");
  }

  private static Set<String> ids(LocalSandbox engine) {
    return engine.list().stream().map(i -> i.ref().id()).collect(Collectors.toSet());
  }

  private static Set<String> images(LocalSandbox engine) {
    return engine.images().stream().map(ImageInfo::name).collect(Collectors.toSet());
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
      for (int i = 0; i < CommandRoutes.MAX_COMMANDS_PER_ORGANIZATION; i++) {
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
