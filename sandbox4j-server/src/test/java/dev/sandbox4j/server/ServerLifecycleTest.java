package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Lifecycle routes: suspend, resume, stop, start, hibernate, fork and snapshots, per organization.
 */
class ServerLifecycleTest {

  @TempDir Path data;

  @Test
  void lifecycleForkAndSnapshots() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("life");
      String id = s.create(key, "{\"labels\": {\"app\": \"x\"}, \"env\": {\"E\": \"1\"}}");
      String base = "/v1/sandboxes/" + id;
      assertThat(
              s.send(key, "PUT", base + "/files/content?path=kept.txt", "kept".getBytes(), null)
                  .statusCode())
          .isEqualTo(204);

      assertThat(state(s.call(key, "POST", base + "/suspend", null))).isEqualTo("suspended");
      assertThat(state(s.call(key, "GET", base, null))).isEqualTo("suspended");
      assertThat(state(s.call(key, "POST", base + "/resume", null))).isEqualTo("running");
      assertThat(state(s.call(key, "POST", base + "/stop", null))).isEqualTo("stopped");
      assertThat(s.call(key, "GET", "/v1/sandboxes?state=stopped", null).json().get("items"))
          .extracting(n -> n.get("id").asText())
          .containsExactly(id);
      assertThat(state(s.call(key, "POST", base + "/start", null))).isEqualTo("running");
      TestServer.Answer hibernated = s.call(key, "POST", base + "/hibernate", null);
      assertThat(hibernated.status()).as(hibernated.text()).isEqualTo(200);
      assertThat(state(hibernated)).isEqualTo("hibernated");
      // any operation wakes it, with the env it was created with
      assertThat(
              TestServer.stdout(
                  s.exec(key, id, "{\"shell\": \"cat kept.txt; echo $E\"}"), "stdout"))
          .isEqualTo("kept1\n");

      TestServer.Answer filesOnly = s.call(key, "POST", base + "/fork", "{\"filesOnly\": true}");
      assertThat(filesOnly.status()).as(filesOnly.text()).isEqualTo(201);
      JsonNode fork = filesOnly.json();
      String forkId = fork.get("sandbox").get("id").asText();
      s.track(forkId);
      assertThat(fork.get("processesCopied").asBoolean()).isFalse();
      assertThat(fork.get("reason").asText()).isNotBlank();
      assertThat(fork.get("sandbox").get("labels").get("app").asText()).isEqualTo("x");
      assertThat(
              TestServer.stdout(
                  s.exec(key, forkId, "{\"shell\": \"cat kept.txt; echo $E\"}"), "stdout"))
          .isEqualTo("kept1\n");

      TestServer.Answer full = s.call(key, "POST", base + "/fork", null);
      assertThat(full.status()).as(full.text()).isEqualTo(201);
      s.track(full.json().get("sandbox").get("id").asText());
      assertThat(full.json().get("notCarried").isArray()).isTrue();

      TestServer.Answer snap =
          s.call(key, "POST", base + "/snapshots", "{\"name\": \"with-file\"}");
      assertThat(snap.status()).as(snap.text()).isEqualTo(201);
      assertThat(snap.json().get("name").asText()).isEqualTo("with-file");
      assertThat(snap.json().get("source").asText()).isEqualTo(id);
      assertThat(s.call(key, "GET", "/v1/snapshots", null).json().get("items"))
          .extracting(n -> n.get("name").asText())
          .containsExactly("with-file");
      String fromSnapshot = s.create(key, "{\"snapshot\": \"with-file\"}");
      assertThat(
              TestServer.stdout(
                  s.exec(key, fromSnapshot, "{\"argv\": [\"cat\", \"kept.txt\"]}"), "stdout"))
          .isEqualTo("kept");
      TestServer.Answer combined =
          s.call(key, "POST", "/v1/sandboxes", "{\"snapshot\": \"with-file\", \"cpus\": 2}");
      assertThat(combined.status()).isEqualTo(400);
      assertThat(combined.error().get("field").asText()).isEqualTo("snapshot");
      TestServer.Answer unknown = s.call(key, "POST", "/v1/sandboxes", "{\"snapshot\": \"nope\"}");
      assertThat(unknown.status()).isEqualTo(404);
      assertThat(unknown.error().get("field").asText()).isEqualTo("snapshot");
      assertThat(s.call(key, "DELETE", "/v1/snapshots/with-file", null).status()).isEqualTo(204);
      assertThat(s.call(key, "DELETE", "/v1/snapshots/with-file", null).status()).isEqualTo(404);
      assertThat(s.call(key, "GET", "/v1/snapshots", null).json().get("items")).isEmpty();
    }
  }

  private static String state(TestServer.Answer a) throws Exception {
    assertThat(a.status()).as(a.text()).isEqualTo(200);
    return a.json().get("state").asText();
  }
}
