package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.RegistryImages;
import dev.sandbox4j.runtime.TestRegistry;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 20 on the server: a create may name an image by registry reference only where the operator
 * allowed its registry or repository prefix; the engine pulls it on first use. A reference from
 * anywhere else is a 400 naming {@code image}; one the registry does not have is a 404 naming it; a
 * malformed one, or any on a server that allows no registry, is the 404 of a name that exists
 * nowhere (tenancy: nothing tells it from another organization's name); never a 500.
 */
class RegistryReferencesTest {
  @TempDir Path temp;

  @Test
  void aCreateNamesAnAllowedReferenceAndTheServerPullsIt() throws Exception {
    TestServer.requireLocalEngine();
    TestRegistry.requireRegistry();
    try (TestRegistry registry =
        TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS)) {
      RegistryImages.Image image = RegistryImages.zstdLayer(temp.resolve("image"));
      registry.push(image.layout(), "team/tool:1");
      registry.push(image.layout(), "other/tool:1");
      String allowed = registry.host() + "/team/tool:1";
      try (TestServer s =
          new TestServer(temp.resolve("data"), b -> b.allowRegistry(registry.host() + "/team"))) {
        String key = s.key("acme");
        try {
          String id = s.create(key, "{\"image\": \"" + allowed + "\"}");
          assertThat(
                  s.call(key, "GET", "/v1/sandboxes/" + id, null)
                      .json()
                      .get("workingDirectory")
                      .asText())
              .as("the image's, which sets no WorkingDir")
              .isEqualTo("/");
          assertThat(TestServer.stdout(s.exec(key, id, "{\"shell\": \"pwd\"}"), "stdout"))
              .isEqualTo("/\n");
          assertThat(TestServer.stdout(s.exec(key, id, "{\"shell\": \"cat /zstd.txt\"}"), "stdout"))
              .isEqualTo(image.files().get("/zstd.txt"));

          TestServer.Answer elsewhere =
              s.call(
                  key,
                  "POST",
                  "/v1/sandboxes",
                  "{\"image\": \"" + registry.host() + "/other/tool:1\"}");
          assertThat(elsewhere.status()).as(elsewhere.text()).isEqualTo(400);
          assertThat(elsewhere.error().get("field").asText()).isEqualTo("image");
          assertThat(elsewhere.error().get("message").asText())
              .contains("does not pull from", registry.host() + "/team");
          // a prefix matches whole path parts only
          TestServer.Answer lookalike =
              s.call(
                  key,
                  "POST",
                  "/v1/sandboxes",
                  "{\"image\": \"" + registry.host() + "/teammate/tool:1\"}");
          assertThat(lookalike.status()).as(lookalike.text()).isEqualTo(400);

          for (String name : new String[] {"Team/Tool", "../images/default"}) {
            TestServer.Answer malformed =
                s.call(key, "POST", "/v1/sandboxes", "{\"image\": \"" + name + "\"}");
            assertThat(malformed.status()).as(malformed.text()).isEqualTo(404);
            assertThat(malformed.error().get("field").asText()).isEqualTo("image");
          }

          TestServer.Answer missing =
              s.call(
                  key,
                  "POST",
                  "/v1/sandboxes",
                  "{\"image\": \"" + registry.host() + "/team/missing:1\"}");
          assertThat(missing.status()).as(missing.text()).isEqualTo(404);
          assertThat(missing.error().get("field").asText()).isEqualTo("image");
          assertThat(missing.error().get("message").asText()).contains("cannot be pulled");
        } finally {
          s.engine.removeImage(allowed);
        }
      }

      try (TestServer none = new TestServer(temp.resolve("data2"))) {
        TestServer.Answer refused =
            none.call(
                none.key("acme"), "POST", "/v1/sandboxes", "{\"image\": \"" + allowed + "\"}");
        assertThat(refused.status())
            .as("a server that allows no registry: as any name not published")
            .isEqualTo(404);
        assertThat(refused.error().get("field").asText()).isEqualTo("image");
      }
    }
  }

  @Test
  void anImageLargerThanTheEngineTakesIsA400NamingImageAndNothingOfItIsKept() throws Exception {
    TestServer.requireLocalEngine();
    TestRegistry.requireRegistry();
    try (TestRegistry registry =
        TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS)) {
      // a few KiB of gzip that extract to 48 MiB of zeros
      RegistryImages.LargeFile bomb =
          RegistryImages.compressibleLayer(temp.resolve("bomb"), 48 << 20);
      registry.push(bomb.image().layout(), "team/bomb:1");
      String reference = registry.host() + "/team/bomb:1";
      LocalSandbox engine = LocalSandbox.builder().maxImageSize(16 << 20).build();
      try (TestServer s =
          new TestServer(
              temp.resolve("data"), engine, b -> b.allowRegistry(registry.host() + "/team"))) {
        TestServer.Answer refused =
            s.call(s.key("acme"), "POST", "/v1/sandboxes", "{\"image\": \"" + reference + "\"}");

        assertThat(refused.status()).as(refused.text()).isEqualTo(400);
        assertThat(refused.error().get("field").asText()).isEqualTo("image");
        assertThat(refused.error().get("message").asText())
            .contains("larger than this engine pulls", "extracted", "limit of 16.0 MiB");
        assertThat(engine.images()).noneMatch(i -> reference.equals(i.reference()));
      }
    }
  }

  @Test
  void anAllowedRegistryIsAHostOrARepositoryPrefix() {
    assertThat(RegistryAllowlist.checkEntry("Docker.IO/")).isEqualTo("docker.io");
    assertThat(RegistryAllowlist.checkEntry("ghcr.io/acme")).isEqualTo("ghcr.io/acme");
    assertThat(RegistryAllowlist.checkEntry("localhost:5000")).isEqualTo("localhost:5000");
    for (String bad : new String[] {"", "https://ghcr.io", "ghcr.io/a@sha256:x", "a b"}) {
      assertThatThrownBy(() -> RegistryAllowlist.checkEntry(bad))
          .isInstanceOf(IllegalArgumentException.class);
    }
    RegistryAllowlist list = new RegistryAllowlist(java.util.List.of("docker.io/library"));
    assertThat(list.allows("docker.io/library/python:3")).isTrue();
    assertThat(list.allows("docker.io/libraryx/python:3")).isFalse();
    assertThat(list.allows("docker.io/bitnami/redis:7")).isFalse();
  }
}
