package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.core.DefaultDockerClientConfig;
import com.github.dockerjava.core.DockerClientImpl;
import com.github.dockerjava.zerodep.ZerodepDockerHttpClient;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

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

  @Test
  void optionsADockerSandboxCannotTakeAreRefusedByName() {
    Run r = run("create", "--provider", "docker", "--disk-inodes", "100000");
    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err()).contains("--disk-inodes is not supported by docker sandboxes yet");
  }
}
