package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.cli.CloudCli.Run;
import dev.sandbox4j.kubernetes.FakeCluster;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse.BodyHandlers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --provider k8s} and {@code serve --provider k8s} through the CLI, against the Kubernetes
 * module's FAKE cluster (fabric8's mock API server with a test-side kubelet whose "pods" are
 * directories of this host; no real cluster is reachable here), found through a {@code KUBECONFIG}
 * in the CLI's environment as a user's would point at a real one.
 */
class KubernetesCliTest {
  private static FakeCluster cluster;
  private static Map<String, String> env;
  @TempDir static Path home;

  @BeforeAll
  static void startFake() throws Exception {
    Path node = Files.createDirectories(home.resolve("node"));
    cluster = new FakeCluster(node, false);
    env = Map.of("KUBECONFIG", cluster.writeKubeconfig(home, "from-kubeconfig").toString());
  }

  @AfterAll
  static void stopFake() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static Run run(Map<String, String> environment, String... args) {
    return CloudCli.run(home, environment, args);
  }

  @Test
  void createExecAndRemoveAPodInTheKubeconfigsNamespace() {
    Run create = run(env, "--quiet", "create", "--provider", "k8s", "--cpus", "1");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    assertThat(ref).startsWith("k8s:from-kubeconfig/");
    String pod = ref.substring(ref.indexOf('/') + 1);
    try {
      assertThat(cluster.podNames("from-kubeconfig")).contains(pod);
      Run exec = run(env, "exec", ref, "--", "sh", "-c", "echo hello > x; cat x");
      assertThat(exec.exitCode()).as(exec.err()).isZero();
      assertThat(exec.out()).isEqualTo("hello\n");
      Run failing = run(env, "exec", ref, "--", "sh", "-c", "exit 7");
      assertThat(failing.exitCode()).as("the command's own exit code").isEqualTo(7);
      Run suspend = run(env, "suspend", ref);
      assertThat(suspend.exitCode()).as("a plain pod cannot be suspended").isNotZero();
      assertThat(suspend.err()).containsIgnoringCase("suspend");
    } finally {
      Run rm = run(env, "rm", ref);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
    assertThat(cluster.podNames("from-kubeconfig")).doesNotContain(pod);
  }

  @Test
  void forwardServesAPodPortUntilInterrupted() throws Exception {
    Run create = run(env, "--quiet", "create", "--provider", "k8s");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    int podPort;
    try (java.net.ServerSocket probe = new java.net.ServerSocket(0)) {
      podPort = probe.getLocalPort(); // the fake's pods share this host's network
    }
    var workspace =
        dev.sandbox4j.workspace.Workspace.of(
            Providers.kubernetesBuilder(env)
                .build()
                .backend(dev.sandbox4j.workspace.WorkspaceRef.parse(ref))
                .orElseThrow());
    workspace.writeText("index.txt", "served");
    var server =
        workspace.start(
            dev.sandbox4j.workspace.Command.argv(
                List.of(
                    "python3",
                    "-m",
                    "http.server",
                    Integer.toString(podPort),
                    "--bind",
                    "127.0.0.1")),
            dev.sandbox4j.workspace.RunOptions.defaults());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    Thread forwarding =
        Thread.ofVirtual()
            .start(
                () ->
                    Cli.run(
                        new CliContext(
                            home,
                            new ByteArrayInputStream(new byte[0]),
                            new PrintStream(out, true, StandardCharsets.UTF_8),
                            new PrintStream(err, true, StandardCharsets.UTF_8),
                            env),
                        "forward",
                        ref,
                        Integer.toString(podPort)));
    try (HttpClient http = HttpClient.newHttpClient()) {
      long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      String body = null;
      while (body == null) { // waits for the CLI to print its port and the server to listen
        String printed = out.toString(StandardCharsets.UTF_8).strip();
        try {
          if (printed.startsWith("127.0.0.1:")) {
            URI url = URI.create("http://" + printed + "/index.txt");
            body = http.send(HttpRequest.newBuilder(url).build(), BodyHandlers.ofString()).body();
          }
        } catch (IOException notYet) {
          // the server in the pod is not listening yet
        }
        if (body == null) {
          assertThat(System.nanoTime()).as(err.toString()).isLessThan(deadline);
          Thread.sleep(100);
        }
      }
      assertThat(body).isEqualTo("served");
      assertThat(forwarding.isAlive()).as("forward stays in the foreground").isTrue();
      assertThat(err.toString(StandardCharsets.UTF_8)).contains("until interrupted");
    } finally {
      forwarding.interrupt();
      forwarding.join(10_000);
      server.kill();
      run(env, "rm", ref);
    }
    assertThat(forwarding.isAlive()).as("an interrupt ends it").isFalse();
  }

  @Test
  void theNamespaceVariableWinsOverTheKubeconfigs() {
    Map<String, String> other = new java.util.HashMap<>(env);
    other.put(Providers.K8S_NAMESPACE_VARIABLE, "team-a");
    Run create = run(other, "--quiet", "create", "--provider", "k8s");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    assertThat(ref).startsWith("k8s:team-a/");
    assertThat(run(other, "rm", ref).exitCode()).isZero();
  }

  @Test
  void whatAPodCannotTakeIsRefusedByName() {
    Run snapshot = run(env, "create", "--provider", "k8s", "--snapshot", "s1");
    assertThat(snapshot.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(snapshot.err()).contains("--snapshot is not supported by k8s sandboxes");
    Run domains = run(env, "create", "--provider", "k8s", "--egress", "api.example.com");
    assertThat(domains.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(domains.err()).contains("domains need an egress proxy");
    Run user = run(env, "create", "--provider", "k8s", "--user", "nobody");
    assertThat(user.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(user.err()).contains("numeric uid");
    Run badConfig =
        run(Map.of("KUBECONFIG", home.resolve("nope").toString()), "create", "--provider", "k8s");
    assertThat(badConfig.exitCode()).isNotZero();
    assertThat(badConfig.err()).contains("KUBECONFIG");
  }

  @Test
  void theNamespaceOptionIsForK8sOnly() {
    Run serve = run(env, "serve", "--provider", "docker", "--namespace", "x", "--port", "0");
    assertThat(serve.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(serve.err()).contains("--namespace is for --provider k8s only");
  }

  @Test
  void aServerOnKubernetesServesPodsThroughTheApi() throws Exception {
    Path data = home.resolve("served");
    String key =
        run(env, "keys", "--data", data.toString(), "create", "--org", "cli").out().strip();
    try (var served = new CloudCli.Served(home, env, "k8s", data, "--namespace", "served")) {
      var client = dev.sandbox4j.remote.RemoteSandbox.builder().url(served.uri()).apiKey(key);
      var provider = client.build();
      var ws = dev.sandbox4j.workspace.Workspace.of(provider.newBackend());
      var ref = ws.open();
      try {
        var hello = ws.run(dev.sandbox4j.workspace.Command.shell("echo hi; exit 3"));
        assertThat(hello.exitCode()).as(hello.stderrText()).isEqualTo(3);
        assertThat(hello.stdoutText()).isEqualTo("hi\n");
        assertThat(cluster.podNames("served")).as("--namespace's pods").hasSize(1);
      } finally {
        provider.destroy(ref);
      }
      var withDisk = client.disk(1L << 30).build();
      assertThatThrownBy(() -> dev.sandbox4j.workspace.Workspace.of(withDisk.newBackend()).open())
          .hasMessageContaining("diskBytes: a pod has no disk quota of ours");
    }
  }
}
