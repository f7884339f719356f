package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.core.DefaultDockerClientConfig;
import com.github.dockerjava.core.DockerClientImpl;
import com.github.dockerjava.zerodep.ZerodepDockerHttpClient;
import dev.sandbox4j.docker.DockerPrerequisites;
import dev.sandbox4j.docker.DockerSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code --provider docker} through the CLI, against the machine's Docker daemon. */
class DockerCliTest {
  private static final Path HOME =
      Path.of(Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"));

  record Run(int exitCode, String out, String err) {}

  @BeforeAll
  static void requireDaemon() {
    boolean answers;
    try {
      URI socket = URI.create("unix:///var/run/docker.sock");
      DockerClient client =
          DockerClientImpl.getInstance(
              DefaultDockerClientConfig.createDefaultConfigBuilder()
                  .withDockerHost(socket.toString())
                  .build(),
              new ZerodepDockerHttpClient.Builder().dockerHost(socket).build());
      client.pingCmd().exec();
      answers = true;
    } catch (RuntimeException e) {
      answers = false;
    }
    Prerequisites.require(
        answers && Files.exists(Path.of("/var/run/docker.sock")),
        "a Docker daemon on /var/run/docker.sock");
  }

  private static Run run(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(HOME, new ByteArrayInputStream(new byte[0]), o, e), args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  @Test
  void createExecAndRemoveADockerSandbox() {
    Run create = run("--quiet", "create", "--provider", "docker", "--label", "sandbox4j.test=cli");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    assertThat(ref).matches("docker:[0-9a-f]{12}");
    try {
      Run exec = run("exec", ref, "--", "sh", "-c", "id -un; echo $0 > /tmp/x; cat /tmp/x");
      assertThat(exec.exitCode()).as(exec.err()).isZero();
      assertThat(exec.out()).isEqualTo("sandbox\nsh\n");
      Run failing = run("exec", ref, "--", "sh", "-c", "exit 7");
      assertThat(failing.exitCode()).as("the command's own exit code").isEqualTo(7);
      Run suspend = run("suspend", ref);
      assertThat(suspend.exitCode()).as(suspend.err()).isZero();
      Run ls = run("ls", "--provider", "docker", "--json");
      assertThat(ls.out()).contains("\"id\":\"" + ref.substring(7) + "\",\"state\":\"suspended\"");
      Run fork = run("--quiet", "fork", ref);
      assertThat(fork.exitCode()).as(fork.err()).isZero();
      String child = fork.out().strip();
      assertThat(run("exec", child, "--", "cat", "/tmp/x").out()).isEqualTo("sh\n");
      assertThat(run("rm", child).exitCode()).isZero();
      Run hibernate = run("hibernate", ref);
      assertThat(hibernate.exitCode()).isEqualTo(ExitCodes.USAGE);
      assertThat(hibernate.err()).contains("provider 'docker' cannot hibernate its sandboxes");
    } finally {
      Run rm = run("rm", ref);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
    Run gone = run("exec", ref, "--", "true");
    assertThat(gone.exitCode()).isNotZero();
    assertThat(gone.err()).contains(ref.substring("docker:".length()));
  }

  @Test
  void aDockerSandboxsEgressNetworkAndPortUrlGoThroughTheCommands() {
    Run create =
        run(
            "--quiet",
            "create",
            "--provider",
            "docker",
            "--egress",
            "api.example.com",
            "--port-token",
            "--network",
            "cli-team",
            "--label",
            "sandbox4j.test=cli");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    try {
      Run exec = run("exec", ref, "--", "hostname");
      assertThat(exec.exitCode())
          .as("the CLI reaches into the sandbox's named network: %s", exec.err())
          .isZero();
      assertThat(run("ls", "--provider", "docker", "--json").out()).contains("cli-team");
      Run shown = run("egress", ref, "--json");
      assertThat(shown.exitCode()).as(shown.err()).isZero();
      assertThat(shown.out()).contains("api.example.com");
      Run changed = run("egress", ref, "none");
      assertThat(changed.exitCode()).as(changed.err()).isZero();
      assertThat(run("egress", ref, "--json").out()).contains("\"mode\":\"none\"");
      Run url = run("url", ref, "8000");
      assertThat(url.exitCode()).as(url.err()).isZero();
      assertThat(url.out()).contains("http://8000-" + ref.substring(7) + ".localhost:");
    } finally {
      assertThat(run("rm", ref).exitCode()).isZero();
    }
  }

  @Test
  void doctorChecksTheDaemonAndGcCleansDockerOrphansToo() {
    Run doctor = run("doctor", "--docker");
    assertThat(doctor.exitCode()).as(doctor.out() + doctor.err()).isZero();
    assertThat(doctor.out())
        .contains("ok       docker daemon: unix:///var/run/docker.sock")
        .contains("ok       docker answers: Docker ")
        .contains("ok       docker default image: sandbox4j/default:");
    Run gc = run("gc", "--json");
    assertThat(gc.exitCode()).as(gc.err()).isZero();
    assertThat(gc.err()).doesNotContain("cannot clean docker");
  }

  /**
   * {@code serve --provider docker}: the API creates, runs in and deletes a container of the
   * daemon, on the egress network; what docker cannot do is a 501. Its containers carry a random
   * test label, and none is left.
   */
  @Test
  void serveProviderDockerServesTheDaemonsContainers(@TempDir Path data) throws Exception {
    String tag = java.util.HexFormat.of().toHexDigits(System.nanoTime());
    Run created = run("keys", "--data", data.toString(), "create", "--org", "cli");
    assertThat(created.exitCode()).as(created.err()).isZero();
    String key = created.out().strip();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream errStream = new PrintStream(err, true, StandardCharsets.UTF_8);
    Thread serving =
        Thread.ofVirtual()
            .start(
                () ->
                    Cli.run(
                        new CliContext(
                            HOME,
                            new ByteArrayInputStream(new byte[0]),
                            new PrintStream(new ByteArrayOutputStream()),
                            errStream),
                        "serve",
                        "--provider",
                        "docker",
                        "--port",
                        "0",
                        "--data",
                        data.toString()));
    DockerSandbox docker = new DockerSandbox();
    try {
      Matcher uri = Pattern.compile("serving on (http://\\S+)").matcher("");
      for (int i = 0; i < 600 && !uri.reset(err.toString(StandardCharsets.UTF_8)).find(); i++) {
        Thread.sleep(50);
      }
      assertThat(uri.reset(err.toString(StandardCharsets.UTF_8)).find())
          .as(err.toString(StandardCharsets.UTF_8))
          .isTrue();
      String base = uri.group(1);
      String labels = "\"labels\": {\"sandbox4j.test\": \"" + tag + "\"}";

      HttpResponse<String> create = call(base, key, "POST", "/v1/sandboxes", "{" + labels + "}");
      assertThat(create.statusCode()).as(create.body()).isEqualTo(201);
      String id = JSON.readTree(create.body()).get("id").asText();
      assertThat(id).matches("[0-9a-f]{12}");
      assertThat(docker.info(new WorkspaceRef("docker", id))).isPresent();

      HttpResponse<String> exec =
          call(
              base,
              key,
              "POST",
              "/v1/sandboxes/" + id + "/exec",
              "{\"argv\": [\"sh\", \"-c\", \"id -un; ls /sys/class/net\"]}");
      assertThat(exec.statusCode()).as(exec.body()).isEqualTo(200);
      StringBuilder stdout = new StringBuilder();
      for (String line : exec.body().split("\n")) {
        JsonNode event = JSON.readTree(line);
        if (event.get("type").asText().equals("stdout")) {
          stdout.append(
              new String(
                  Base64.getDecoder().decode(event.get("data").asText()), StandardCharsets.UTF_8));
        }
      }
      assertThat(stdout.toString()).as(exec.body()).isEqualTo("sandbox\neth0\nlo\n");
      HttpResponse<String> egress =
          call(base, key, "PUT", "/v1/sandboxes/" + id + "/egress", "{\"mode\": \"none\"}");
      assertThat(egress.statusCode()).as(egress.body()).isEqualTo(200);

      HttpResponse<String> hibernate =
          call(base, key, "POST", "/v1/sandboxes/" + id + "/hibernate", null);
      assertThat(hibernate.statusCode()).as(hibernate.body()).isEqualTo(501);
      assertThat(JSON.readTree(hibernate.body()).at("/error/code").asText())
          .isEqualTo("not_supported");
      assertThat(hibernate.body()).contains("'docker'");
      HttpResponse<String> inodes =
          call(base, key, "POST", "/v1/sandboxes", "{" + labels + ", \"diskInodes\": 100000}");
      assertThat(inodes.statusCode()).as(inodes.body()).isEqualTo(501);
      assertThat(JSON.readTree(inodes.body()).at("/error/field").asText()).isEqualTo("diskInodes");

      assertThat(call(base, key, "DELETE", "/v1/sandboxes/" + id, null).statusCode())
          .isEqualTo(204);
      assertThat(docker.info(new WorkspaceRef("docker", id))).isEmpty();
    } finally {
      serving.interrupt();
      serving.join();
      List<String> left = DockerPrerequisites.containersLabelled(docker, tag);
      for (String names : left) { // only this test's: removed even when it failed
        Matcher leftId = Pattern.compile("sandbox4j-([0-9a-f]{12})").matcher(names);
        if (leftId.find()) {
          docker.destroy(new WorkspaceRef("docker", leftId.group(1)));
        }
      }
      assertThat(left).as("containers this test left").isEmpty();
    }
  }

  private static final ObjectMapper JSON = new ObjectMapper();

  private static HttpResponse<String> call(
      String base, String key, String method, String path, String json) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .header("Authorization", "Bearer " + key)
            .method(
                method,
                json == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(json));
    if (json != null) {
      b.header("Content-Type", "application/json");
    }
    return HttpClient.newHttpClient().send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void optionsADockerSandboxCannotTakeAreRefusedByName() {
    Run r = run("create", "--provider", "docker", "--disk-inodes", "100000");
    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err()).contains("--disk-inodes is not supported by docker sandboxes yet");
  }
}
