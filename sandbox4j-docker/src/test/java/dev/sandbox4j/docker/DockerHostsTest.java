package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Finding the daemon as the docker CLI does, against a made-up home (no daemon needed). */
class DockerHostsTest {
  @TempDir Path home;

  @Test
  void dockerHostWinsOverEverythingElse() throws Exception {
    writeContext("remote", "tcp://10.0.0.9:2375");
    DockerHosts.Found found =
        DockerHosts.discover(
            Map.of("DOCKER_HOST", "unix:///tmp/my.sock", "DOCKER_CONTEXT", "remote"), home);
    assertThat(found.host()).isEqualTo(URI.create("unix:///tmp/my.sock"));
    assertThat(found.how()).isEqualTo("DOCKER_HOST");
  }

  @Test
  void theCurrentContextOfTheCliConfigIsFollowedToItsEndpoint() throws Exception {
    writeContext("colima", "unix:///home/u/.colima/default/docker.sock");
    Files.writeString(home.resolve(".docker/config.json"), "{\"currentContext\":\"colima\"}");
    DockerHosts.Found found = DockerHosts.discover(Map.of(), home);
    assertThat(found.host()).isEqualTo(URI.create("unix:///home/u/.colima/default/docker.sock"));
    assertThat(found.how()).isEqualTo("context colima");
  }

  @Test
  void dockerContextOverridesTheConfigAndDefaultMeansNoContext() throws Exception {
    writeContext("a", "tcp://a:2375");
    writeContext("b", "tcp://b:2375");
    Files.writeString(home.resolve(".docker/config.json"), "{\"currentContext\":\"a\"}");
    assertThat(DockerHosts.discover(Map.of("DOCKER_CONTEXT", "b"), home).host())
        .isEqualTo(URI.create("tcp://b:2375"));
    Path socket = Files.createDirectories(home.resolve(".docker/run")).resolve("docker.sock");
    Files.createFile(socket);
    assertThat(DockerHosts.discover(Map.of("DOCKER_CONTEXT", "default"), home).host().getPath())
        .isIn("/var/run/docker.sock", socket.toString());
  }

  @Test
  void aContextWhoseDescriptionIsMissingIsAClearError() throws Exception {
    Files.createDirectories(home.resolve(".docker"));
    Files.writeString(home.resolve(".docker/config.json"), "{\"currentContext\":\"gone\"}");
    assertThatThrownBy(() -> DockerHosts.discover(Map.of(), home))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("'gone'")
        .hasMessageContaining("meta.json");
  }

  @Test
  void socketsAreTriedInTheCliOrderRootlessAndDesktopIncluded() {
    assertThat(DockerHosts.candidates(Map.of("XDG_RUNTIME_DIR", "/run/user/1000"), home))
        .containsExactly(
            Path.of("/var/run/docker.sock"),
            Path.of("/run/user/1000/docker.sock"),
            home.resolve(".docker/run/docker.sock"),
            home.resolve(".docker/desktop/docker.sock"),
            Path.of("/run/user/1000/podman/podman.sock"),
            Path.of("/run/podman/podman.sock"));
  }

  @Test
  void unsupportedSchemesAreRefusedByName() {
    assertThatThrownBy(() -> DockerHosts.discover(Map.of("DOCKER_HOST", "ssh://me@box"), home))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("DOCKER_HOST is ssh://me@box")
        .hasMessageContaining("unix://");
  }

  @Test
  void tlsIsRefusedRatherThanSpokenInPlainText() {
    assertThatThrownBy(
            () ->
                DockerHosts.discover(
                    Map.of("DOCKER_HOST", "tcp://box:2376", "DOCKER_TLS_VERIFY", "1"), home))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("DOCKER_TLS_VERIFY");
  }

  private void writeContext(String name, String host) throws Exception {
    String hash =
        HexFormat.of()
            .formatHex(
                MessageDigest.getInstance("SHA-256").digest(name.getBytes(StandardCharsets.UTF_8)));
    Path meta = Files.createDirectories(home.resolve(".docker/contexts/meta").resolve(hash));
    Files.writeString(
        meta.resolve("meta.json"),
        "{\"Name\":\""
            + name
            + "\",\"Metadata\":{},\"Endpoints\":{\"docker\":{\"Host\":\""
            + host
            + "\",\"SkipTLSVerify\":false}}}");
  }
}
