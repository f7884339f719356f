package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Images are the operator's to give: a create may name only an image published to all organizations
 * ({@code default} until unpublished), and an unpublished, unknown or vanished one is a 404 naming
 * the field, never a 500.
 */
class ImagesTest {

  @TempDir Path data;

  @Test
  void aNewDataDirectoryPublishesTheDefaultImageOnly() {
    try (ServerImages images = ServerImages.open(data)) {
      assertThat(images.list()).containsExactly("default");
      assertThat(images.publish("python")).isTrue();
      assertThat(images.publish("python")).isFalse();
      assertThat(images.list()).containsExactly("default", "python");
      assertThat(images.unpublish("default")).isTrue();
      assertThat(images.unpublish("default")).isFalse();
      assertThat(images.list()).containsExactly("python");
      assertThatThrownBy(() -> images.publish("../etc"))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("invalid image name '../etc'");
    }
    try (ServerImages again = ServerImages.open(data)) { // it is stored, not in memory
      assertThat(again.list()).containsExactly("python");
    }
  }

  @Test
  void anImageIsUsableOnlyWhilePublished() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("img");
      String id = s.create(key, "{}");
      String name = "shared-" + Long.toHexString(System.nanoTime());
      // an image on the host (saved from a sandbox by the operator, not through the API)
      s.engine.snapshot(new WorkspaceRef("local", id), name);
      try {
        String body = "{\"image\": \"" + name + "\"}";
        TestServer.Answer before = s.call(key, "POST", "/v1/sandboxes", body);
        assertThat(before.status()).as(before.text()).isEqualTo(404);
        assertThat(before.error().get("field").asText()).isEqualTo("image");
        assertThat(s.call(key, "GET", "/v1/images", null).json().get("items"))
            .extracting(n -> n.get("name").asText())
            .doesNotContain(name);

        try (ServerImages images = ServerImages.open(data)) { // beside the running server
          images.publish(name);
        }
        assertThat(s.call(key, "GET", "/v1/images", null).json().get("items"))
            .extracting(n -> n.get("name").asText())
            .contains(name);
        String made = s.create(key, body);
        assertThat(s.call(key, "GET", "/v1/sandboxes/" + made, null).json().get("image").asText())
            .isEqualTo(name);

        try (ServerImages images = ServerImages.open(data)) {
          images.unpublish(name);
          images.unpublish("default");
        }
        assertThat(s.call(key, "POST", "/v1/sandboxes", body).status()).isEqualTo(404);
        TestServer.Answer noDefault = s.call(key, "POST", "/v1/sandboxes", "{}");
        assertThat(noDefault.status()).as(noDefault.text()).isEqualTo(404);
        assertThat(noDefault.error().get("field").asText()).isEqualTo("image");
        assertThat(noDefault.error().get("message").asText()).contains("'default'");
        // sandboxes made from it keep running
        assertThat(s.call(key, "GET", "/v1/sandboxes/" + made, null).json().get("state").asText())
            .isEqualTo("running");

        // published, then removed from the host: still the 404, not a 500
        try (ServerImages images = ServerImages.open(data)) {
          images.publish(name);
          images.publish("default");
        }
        s.engine.removeSnapshot(name);
        TestServer.Answer gone = s.call(key, "POST", "/v1/sandboxes", body);
        assertThat(gone.status()).as(gone.text()).isEqualTo(404);
        assertThat(gone.error().get("field").asText()).isEqualTo("image");
      } finally {
        s.engine.removeSnapshot(name);
      }
    }
  }

  /**
   * The name the engine stores a snapshot under is never shown: an organization sees its snapshot
   * as {@code snapshot:NAME}, so no answer teaches the engine's naming scheme or an organization's
   * number.
   */
  @Test
  void theEngineNameOfASnapshotIsNeverShown() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("shown");
      String id = s.create(key, "{}");
      assertThat(
              s.call(key, "POST", "/v1/sandboxes/" + id + "/snapshots", "{\"name\": \"base\"}")
                  .status())
          .isEqualTo(201);
      try {
        String child = s.create(key, "{\"snapshot\": \"base\"}");
        TestServer.Answer view = s.call(key, "GET", "/v1/sandboxes/" + child, null);
        assertThat(view.json().get("image").asText()).isEqualTo("snapshot:base");
        TestServer.Answer again =
            s.call(key, "POST", "/v1/sandboxes/" + child + "/snapshots", "{\"name\": \"next\"}");
        assertThat(again.json().get("image").asText()).isEqualTo("snapshot:base");
        for (TestServer.Answer a :
            java.util.List.of(
                view,
                again,
                s.call(key, "GET", "/v1/sandboxes", null),
                s.call(key, "GET", "/v1/snapshots", null))) {
          assertThat(a.text()).doesNotContainPattern("\"o[0-9]+-");
        }
      } finally {
        s.call(key, "DELETE", "/v1/snapshots/base", null);
        s.call(key, "DELETE", "/v1/snapshots/next", null);
      }
    }
  }

  @Test
  void aSnapshotThatVanishedFromTheHostIsNotFound() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("vanish");
      String id = s.create(key, "{}");
      assertThat(
              s.call(key, "POST", "/v1/sandboxes/" + id + "/snapshots", "{\"name\": \"v\"}")
                  .status())
          .isEqualTo(201);
      String stored =
          s.engine.snapshots().stream()
              .filter(i -> i.source().id().equals(id))
              .map(SnapshotInfo::name)
              .findFirst()
              .orElseThrow();
      s.engine.removeSnapshot(stored); // the operator removed it on the host
      TestServer.Answer a = s.call(key, "POST", "/v1/sandboxes", "{\"snapshot\": \"v\"}");
      assertThat(a.status()).as(a.text()).isEqualTo(404);
      assertThat(a.error().get("field").asText()).isEqualTo("snapshot");
      assertThat(s.call(key, "GET", "/v1/snapshots", null).json().get("items")).isEmpty();
      assertThat(s.call(key, "DELETE", "/v1/snapshots/v", null).status()).isEqualTo(204);
    }
  }
}
