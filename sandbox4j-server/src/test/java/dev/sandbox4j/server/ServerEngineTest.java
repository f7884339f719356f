package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SupportsListing;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A server on a provider other than the local engine, with no engine needed: a provider that only
 * lists (none of the other capabilities) answers 501 where it lacks one, and a data directory
 * serves one provider.
 */
class ServerEngineTest {

  @TempDir Path data;

  /** A provider with no sandboxes and no capability but listing. */
  private static class Lister implements WorkspaceProvider, SupportsListing {
    @Override
    public String name() {
      return "lister";
    }

    @Override
    public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
      return Optional.empty();
    }

    @Override
    public WorkspaceBackend newBackend() {
      throw new UnsupportedOperationException("no sandboxes here");
    }

    @Override
    public void destroy(WorkspaceRef ref) {}

    @Override
    public List<SandboxInfo> list() {
      return List.of();
    }

    @Override
    public Optional<SandboxInfo> info(WorkspaceRef ref) {
      return Optional.empty();
    }
  }

  private static ServerEngine engineOf(WorkspaceProvider provider) {
    return new ServerEngine() {
      @Override
      public WorkspaceProvider provider() {
        return provider;
      }

      @Override
      public WorkspaceProvider shaped(Shape shape) {
        return provider;
      }
    };
  }

  @Test
  void routesWhoseCapabilityTheProviderLacksAre501NamingItAndTheProvider() throws Exception {
    try (TestServer s = new TestServer(data, engineOf(new Lister()), b -> b)) {
      String key = s.key("acme");
      TestServer.Answer list = s.call(key, "GET", "/v1/sandboxes", null);
      assertThat(list.status()).as(list.text()).isEqualTo(200);
      TestServer.Answer snapshots = s.call(key, "GET", "/v1/snapshots", null);
      assertThat(snapshots.status()).as(snapshots.text()).isEqualTo(501);
      assertThat(snapshots.error().get("code").asText()).isEqualTo("not_supported");
      assertThat(snapshots.error().get("message").asText())
          .contains("'lister'")
          .contains("SupportsSnapshots");
      TestServer.Answer timers = s.call(key, "POST", "/v1/sandboxes", "{\"idleTimeoutMs\": 1000}");
      assertThat(timers.status()).as(timers.text()).isEqualTo(501);
      assertThat(timers.error().get("field").asText()).isEqualTo("idleTimeoutMs");
      // ownership first: an unknown id is a 404 whatever the provider can do
      assertThat(s.call(key, "POST", "/v1/sandboxes/abc/hibernate", null).status()).isEqualTo(404);
      assertThat(s.call(key, "GET", "/v1/images", null).text()).isEqualTo("{\"items\":[]}");
    }
  }

  @Test
  void aProviderThatCannotListIsRefused() {
    WorkspaceProvider notListing =
        new WorkspaceProvider() {
          @Override
          public String name() {
            return "blind";
          }

          @Override
          public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
            return Optional.empty();
          }

          @Override
          public WorkspaceBackend newBackend() {
            throw new UnsupportedOperationException("no sandboxes here");
          }

          @Override
          public void destroy(WorkspaceRef ref) {}
        };
    assertThatThrownBy(
            () -> SandboxServer.builder().engine(engineOf(notListing)).dataDirectory(data).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'blind'")
        .hasMessageContaining("SupportsListing");
  }

  @Test
  void aServerOnAnotherProviderNeedsItsDataDirectory() {
    assertThatThrownBy(() -> SandboxServer.builder().engine(engineOf(new Lister())).build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("'lister'")
        .hasMessageContaining("dataDirectory");
  }

  @Test
  void aDataDirectoryServesTheProviderOfItsFirstServer() {
    SandboxServer.builder()
        .engine(LocalSandbox.builder().build())
        .dataDirectory(data)
        .build()
        .close();
    assertThatThrownBy(
            () ->
                SandboxServer.builder().engine(engineOf(new Lister())).dataDirectory(data).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("serves provider 'local' sandboxes, not 'lister'");
    SandboxServer.builder()
        .engine(LocalSandbox.builder().build())
        .dataDirectory(data)
        .build()
        .close();

    Path other = data.resolve("other");
    SandboxServer.builder().engine(engineOf(new Lister())).dataDirectory(other).build().close();
    assertThatThrownBy(
            () ->
                SandboxServer.builder()
                    .engine(LocalSandbox.builder().build())
                    .dataDirectory(other)
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("serves provider 'lister' sandboxes, not 'local'");
  }
}
