package dev.sandbox4j.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Commands through the pod exec WebSocket of the fake cluster: the exit status in channel 3's
 * Status (Success, Failure/NonZeroExitCode with an ExitCode cause), stdin framing, a timeout whose
 * kill (a second exec) ends the whole process tree, and a stream cut before its status.
 */
class KubernetesExecTest {
  private static FakeCluster cluster;
  @TempDir static Path node;

  @BeforeAll
  static void start() {
    cluster = new FakeCluster(node, false);
  }

  @AfterAll
  static void stop() {
    cluster.close();
  }

  private static Workspace workspace() {
    return Workspace.of(
        KubernetesSandbox.builder()
            .client(cluster.client)
            .namespace("exec")
            .mode(KubernetesSandbox.Mode.POD)
            .build()
            .newBackend());
  }

  @Test
  void exitCodesComeFromTheStatusChannel() {
    Workspace ws = workspace();
    CommandResult ok = ws.run(Command.shell("echo out; echo err >&2"));
    assertThat(ok.exitCode()).isZero();
    assertThat(ok.stdoutText()).isEqualTo("out\n");
    assertThat(ok.stderrText()).isEqualTo("err\n");
    assertThat(ws.run(Command.shell("exit 3")).exitCode()).isEqualTo(3);
    assertThat(ws.run(Command.argv(java.util.List.of("no-such-program-here"))).exitCode())
        .isEqualTo(127);
  }

  @Test
  void stdinIsFramedAndEnds() {
    Workspace ws = workspace();
    byte[] binary = new byte[200_000];
    for (int i = 0; i < binary.length; i++) {
      binary[i] = (byte) (i * 31);
    }
    CommandResult r =
        ws.run(Command.argv(java.util.List.of("cat")), RunOptions.builder().stdin(binary).build());
    assertThat(r.exitCode()).isZero();
    assertThat(r.stdout()).isEqualTo(binary);
    assertThat(
            ws.run(
                    Command.argv(java.util.List.of("wc", "-c")),
                    RunOptions.builder().stdin(new byte[0]).build())
                .stdoutText()
                .trim())
        .isEqualTo("0");
  }

  @Test
  void timeoutKillsTheTreeIncludingSetsidDaemons() throws Exception {
    Workspace ws = workspace();
    String dir = ws.workingDirectory();
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell(
                        "setsid sh -c 'sleep 300' & echo $! > daemon.pid; echo started; sleep 300"),
                    RunOptions.builder().timeout(Duration.ofSeconds(1)).build()))
        .isInstanceOf(WorkspaceTimeoutException.class)
        .satisfies(
            e ->
                assertThat(((WorkspaceTimeoutException) e).partialStdoutText())
                    .isEqualTo("started\n"));
    long pid = Long.parseLong(Files.readString(Path.of(dir, "daemon.pid")).trim());
    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false))
        .as("the setsid daemon was killed by the second exec")
        .isFalse();
    assertThat(cluster.execCommands).anyMatch(c -> c.contains("kill-tree"));
  }

  @Test
  void aCutStreamIsAnErrorAndTheCommandIsKilled() throws Exception {
    Workspace ws = workspace();
    String dir = ws.workingDirectory();
    cluster.cutExecsPrinting("cut-me-here");
    assertThatThrownBy(
            () -> ws.run(Command.shell("echo $$ > cut.pid; echo cut-me-here; sleep 300")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("without its exit status");
    long pid = Long.parseLong(Files.readString(Path.of(dir, "cut.pid")).trim());
    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)).isFalse();
    assertThat(ws.run(Command.argv(java.util.List.of("echo", "still", "up"))).stdoutText())
        .isEqualTo("still up\n");
  }

  @Test
  void outputOverTheLimitKillsTheCommand() {
    Workspace ws = workspace();
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell("head -c 3000000 /dev/zero; sleep 300"),
                    RunOptions.builder()
                        .outputLimit(1_000_000)
                        .timeout(Duration.ofSeconds(20))
                        .build()))
        .isInstanceOf(dev.sandbox4j.workspace.WorkspaceOutputLimitException.class);
    assertThat(
            new String(
                ws.run(Command.argv(java.util.List.of("true"))).stdout(), StandardCharsets.UTF_8))
        .isEmpty();
  }

  /**
   * Port URLs through the API server's port-forward: a server the workspace starts is reached at
   * the URL, the same host port comes back for the same pod port, and bad ports and gone pods are
   * refused. In the fake, pods share this host's network, so the pod port is picked free here.
   */
  @Test
  void portsAreForwardedThroughTheApiServer() throws Exception {
    KubernetesSandbox provider =
        KubernetesSandbox.builder()
            .client(cluster.client)
            .namespace("ports")
            .mode(KubernetesSandbox.Mode.POD)
            .build();
    Workspace ws = Workspace.of(provider.newBackend());
    ws.writeText("hello.txt", "hi from the pod");
    int podPort;
    try (java.net.ServerSocket probe = new java.net.ServerSocket(0)) {
      podPort = probe.getLocalPort();
    }
    var server =
        ws.start(
            Command.argv(
                java.util.List.of(
                    "python3",
                    "-m",
                    "http.server",
                    Integer.toString(podPort),
                    "--bind",
                    "127.0.0.1")),
            RunOptions.defaults());
    var ref = ws.ref().orElseThrow();
    try (var http = java.net.http.HttpClient.newHttpClient()) {
      java.net.URI url = provider.url(ref, podPort).resolve("hello.txt");
      assertThat(url.getHost()).isEqualTo("127.0.0.1");
      assertThat(provider.forwardTcp(ref, podPort))
          .as("the same pod port, the same host port")
          .isEqualTo(url.getPort());
      String body = null;
      long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      while (body == null) { // the server starting in the pod: wait for it to listen
        try {
          body =
              http.send(
                      java.net.http.HttpRequest.newBuilder(url).build(),
                      java.net.http.HttpResponse.BodyHandlers.ofString())
                  .body();
        } catch (java.io.IOException notYet) {
          assertThat(System.nanoTime()).as("the pod's server never answered").isLessThan(deadline);
          Thread.sleep(100);
        }
      }
      assertThat(body).isEqualTo("hi from the pod");
      assertThat(provider.portToken(ref)).isEmpty();
    } finally {
      server.kill();
    }
    assertThatThrownBy(() -> provider.url(ref, 0)).hasMessageContaining("1 to 65535");
    provider.destroy(ref);
    assertThatThrownBy(() -> provider.forwardTcp(ref, podPort + 1))
        .isInstanceOf(dev.sandbox4j.workspace.WorkspaceUnavailableException.class);
    provider.close();
  }
}
