package dev.sandbox4j.remote;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Configuration from the builder and the environment; no server needed. */
class RemoteSandboxConfigTest {

  private static final String KEY = "s4j_secret-key-value-1234567890";

  @Test
  void urlAndKeyComeFromTheEnvironment() {
    RemoteSandbox remote =
        RemoteSandbox.builder(
                Map.of(
                    RemoteSandbox.URL_VARIABLE,
                    "http://127.0.0.1:7070/",
                    RemoteSandbox.KEY_VARIABLE,
                    KEY))
            .build();
    assertThat(remote.url()).hasToString("http://127.0.0.1:7070");
    assertThat(remote.name()).isEqualTo("remote");
  }

  @Test
  void aMissingUrlNamesItsVariable() {
    assertThatThrownBy(() -> RemoteSandbox.builder(Map.of(RemoteSandbox.KEY_VARIABLE, KEY)).build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("SANDBOX4J_URL");
  }

  @Test
  void aMissingKeyNamesItsVariable() {
    assertThatThrownBy(
            () ->
                RemoteSandbox.builder(Map.of(RemoteSandbox.URL_VARIABLE, "http://127.0.0.1:1"))
                    .build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("SANDBOX4J_API_KEY");
    assertThatThrownBy(
            () ->
                RemoteSandbox.builder(
                        Map.of(
                            RemoteSandbox.URL_VARIABLE,
                            "http://127.0.0.1:1",
                            RemoteSandbox.KEY_VARIABLE,
                            "  "))
                    .build())
        .hasMessageContaining("SANDBOX4J_API_KEY");
  }

  @Test
  void theBuilderWinsOverTheEnvironment() {
    RemoteSandbox remote =
        RemoteSandbox.builder(
                Map.of(RemoteSandbox.URL_VARIABLE, "http://example.invalid:1", "X", "y"))
            .url("https://127.0.0.1:8443")
            .apiKey(KEY)
            .build();
    assertThat(remote.url()).hasToString("https://127.0.0.1:8443");
  }

  @Test
  void badUrlsAndKeysAreRefusedNamingWhatIsWrong() {
    assertThatThrownBy(() -> RemoteSandbox.builder(Map.of()).url("ftp://host/"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("http:// or https://");
    assertThatThrownBy(() -> RemoteSandbox.builder(Map.of()).url("http://host/?key=abc"))
        .hasMessageContaining("query");
    assertThatThrownBy(
            () ->
                RemoteSandbox.builder(
                        Map.of(
                            RemoteSandbox.URL_VARIABLE,
                            "not a url",
                            RemoteSandbox.KEY_VARIABLE,
                            KEY))
                    .build())
        .hasMessageContaining("SANDBOX4J_URL");
    assertThatThrownBy(() -> RemoteSandbox.builder(Map.of()).apiKey("abc\r\nX-Evil: 1"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("apiKey")
        .hasMessageNotContaining("abc");
    assertThatThrownBy(() -> RemoteSandbox.builder(Map.of()).cpus(0)).hasMessageContaining("cpus");
    assertThatThrownBy(() -> RemoteSandbox.builder(Map.of()).workingDirectory("relative"))
        .hasMessageContaining("workingDirectory");
  }

  @Test
  void buildingDoesNoIoAndTheKeyAppearsNowhere() throws IOException {
    int closedPort;
    try (ServerSocket socket = new ServerSocket(0)) {
      closedPort = socket.getLocalPort();
    }
    RemoteSandbox remote =
        RemoteSandbox.builder(Map.of()).url("http://127.0.0.1:" + closedPort).apiKey(KEY).build();
    WorkspaceBackend fresh = remote.newBackend();
    WorkspaceBackend attached = remote.backend(new WorkspaceRef("remote", "abc123")).orElseThrow();

    assertThat(fresh.ref()).as("not created before its first use").isEmpty();
    assertThat(attached.ref()).contains(new WorkspaceRef("remote", "abc123"));
    assertThat(remote.backend(new WorkspaceRef("local", "abc123"))).isEmpty();
    assertThat(remote.toString() + fresh + attached).doesNotContain(KEY);

    assertThatThrownBy(() -> Workspace.of(fresh).run(Command.argv("true")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("cannot reach the sandbox4j server at http://127.0.0.1:" + closedPort)
        .hasMessageNotContaining(KEY);
  }

  @Test
  void aMalformedIdIsRefusedWithoutIo() {
    RemoteSandbox remote =
        RemoteSandbox.builder(Map.of()).url("http://127.0.0.1:1").apiKey(KEY).build();
    assertThatThrownBy(() -> remote.backend(new WorkspaceRef("remote", "../etc")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("malformed remote sandbox id");
    assertThatThrownBy(() -> remote.destroy(new WorkspaceRef("local", "abc")))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aPingIntervalOutsideItsBoundsIsRefusedByName() {
    RemoteSandbox.Builder builder = RemoteSandbox.builder(Map.of());
    assertThatThrownBy(() -> builder.pingInterval(Duration.ofMillis(50)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pingInterval must be between 100ms and 10 minutes: PT0.05S");
    assertThatThrownBy(() -> builder.pingInterval(Duration.ofHours(1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pingInterval");
    assertThatThrownBy(() -> builder.pingInterval(null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("pingInterval");
  }
}
