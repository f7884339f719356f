package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.cli.CloudCli.Run;
import dev.sandbox4j.modal.FakeModalServer;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --provider modal} through the CLI, against the modal module's fake Modal (a gRPC server on
 * loopback over local sandboxes; no real Modal is reachable here), found through the CLI's
 * environment as a user's {@code MODAL_*} variables would point at Modal.
 */
class ModalCliTest {
  private static FakeModalServer modal;
  @TempDir static Path home;

  @BeforeAll
  static void startFake() {
    modal = new FakeModalServer();
  }

  @AfterAll
  static void stopFake() {
    if (modal != null) {
      modal.close();
    }
  }

  private static Run run(Map<String, String> env, String... args) {
    return CloudCli.run(home, env, args);
  }

  private static Run run(String... args) {
    return run(modal.environment(), args);
  }

  @Test
  void createExecAndRemoveAModalSandbox() {
    Run create =
        run(
            "--quiet",
            "create",
            "--provider",
            "modal",
            "--image",
            "debian:bookworm-slim",
            "--label",
            "team=cli");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    assertThat(ref).startsWith("modal:");
    try {
      Run exec = run("exec", ref, "--", "sh", "-c", "echo hello > /tmp/x; cat /tmp/x");
      assertThat(exec.exitCode()).as(exec.err()).isZero();
      assertThat(exec.out()).isEqualTo("hello\n");
      Run failing = run("exec", ref, "--", "sh", "-c", "exit 7");
      assertThat(failing.exitCode()).as("the command's own exit code").isEqualTo(7);
    } finally {
      Run rm = run("rm", ref);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
    Run gone = run("exec", ref, "--", "true");
    assertThat(gone.exitCode()).isNotZero();
    assertThat(gone.err()).contains(ref.substring("modal:".length()));
  }

  @Test
  void whatModalCannotDoIsRefusedByName() {
    Run egress = run("create", "--provider", "modal", "--egress", "api.example.com");
    assertThat(egress.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(egress.err()).contains("--egress is not supported by modal sandboxes");
    Run memory = run("create", "--provider", "modal", "--memory", "1000000");
    assertThat(memory.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(memory.err()).contains("whole number of MiB");
  }

  @Test
  void wrongCredentialsFailSayingSo() {
    Map<String, String> wrong = new java.util.HashMap<>(modal.environment());
    wrong.put("MODAL_TOKEN_SECRET", "as-wrong");
    Run create = run(wrong, "create", "--provider", "modal", "--image", "debian:bookworm-slim");
    assertThat(create.exitCode()).isNotZero();
    assertThat(create.err().toLowerCase(java.util.Locale.ROOT)).contains("token");
  }

  @Test
  void aServerOnModalServesItsSandboxesThroughTheApi() throws Exception {
    Path data = home.resolve("served");
    String key = run("keys", "--data", data.toString(), "create", "--org", "cli").out().strip();
    try (var served = new CloudCli.Served(home, modal.environment(), "modal", data)) {
      var client =
          dev.sandbox4j.remote.RemoteSandbox.builder()
              .url(served.uri())
              .apiKey(key)
              .workingDirectory("/tmp");
      var provider = client.build();
      var ws = dev.sandbox4j.workspace.Workspace.of(provider.newBackend());
      var ref = ws.open();
      try {
        var hello = ws.run(dev.sandbox4j.workspace.Command.shell("echo hi from $(id -un)"));
        assertThat(hello.exitCode()).as(hello.stderrText()).isZero();
        assertThat(hello.stdoutText()).startsWith("hi from ");
      } finally {
        provider.destroy(ref);
      }
      var limited = client.pids(100).build();
      assertThatThrownBy(() -> dev.sandbox4j.workspace.Workspace.of(limited.newBackend()).open())
          .hasMessageContaining("pids: Modal sandboxes have no process limit of ours");
    }
  }
}
