package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.boxd.FakeBoxdServer;
import dev.sandbox4j.cli.CloudCli.Run;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --provider boxd} through the CLI, against the boxd module's fake boxd (a gRPC server and a
 * token endpoint on loopback over local sandboxes; no real boxd is reachable here), found through
 * the CLI's environment as a user's {@code BOXD_*} variables would point at boxd.
 */
class BoxdCliTest {
  private static FakeBoxdServer boxd;
  @TempDir static Path home;

  @BeforeAll
  static void startFake() {
    boxd = new FakeBoxdServer();
  }

  @AfterAll
  static void stopFake() {
    if (boxd != null) {
      boxd.close();
    }
  }

  private static Run run(Map<String, String> env, String... args) {
    return CloudCli.run(home, env, args);
  }

  private static Run run(String... args) {
    return run(boxd.environment(), args);
  }

  @Test
  void createExecSuspendAndRemoveABoxdMachine() {
    Run create = run("--quiet", "create", "--provider", "boxd", "--cpus", "2");
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    assertThat(ref).startsWith("boxd:");
    try {
      Run exec = run("exec", ref, "--", "sh", "-c", "echo hello > /tmp/x; cat /tmp/x");
      assertThat(exec.exitCode()).as(exec.err()).isZero();
      assertThat(exec.out()).isEqualTo("hello\n");
      Run failing = run("exec", ref, "--", "sh", "-c", "exit 7");
      assertThat(failing.exitCode()).as("the command's own exit code").isEqualTo(7);
      Run suspend = run("suspend", ref);
      assertThat(suspend.exitCode()).as(suspend.err()).isZero();
      Run woken = run("exec", ref, "--", "cat", "/tmp/x");
      assertThat(woken.out()).as("a command wakes it, files kept").isEqualTo("hello\n");
    } finally {
      Run rm = run("rm", ref);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
    Run gone = run("exec", ref, "--", "true");
    assertThat(gone.exitCode()).isNotZero();
    assertThat(gone.err()).contains(ref.substring("boxd:".length()));
  }

  @Test
  void whatBoxdCannotDoIsRefusedByName() {
    Run egress = run("create", "--provider", "boxd", "--egress", "api.example.com");
    assertThat(egress.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(egress.err()).contains("--egress is not supported by boxd machines");
    Run memory = run("create", "--provider", "boxd", "--memory", "1g");
    assertThat(memory.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(memory.err()).contains("--memory is not supported by boxd machines");
    Run size = run("create", "--provider", "boxd", "--cpus", "3");
    assertThat(size.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(size.err()).contains("3");
  }

  @Test
  void noCredentialsIsAUsageErrorThatSaysWhatToSet() {
    Run rm = run(Map.of(), "rm", "boxd:m-123");
    assertThat(rm.exitCode()).as(rm.err()).isEqualTo(ExitCodes.USAGE);
    assertThat(rm.err())
        .contains("no boxd credentials: set BOXD_API_KEY")
        .doesNotContain("internal");
  }

  @Test
  void aWrongKeyFailsWithoutShowingIt() {
    Map<String, String> wrong = new java.util.HashMap<>(boxd.environment());
    wrong.put("BOXD_API_KEY", "bxd_wrongwrongwrongwrongwrongwrongwrong00");
    Run create = run(wrong, "create", "--provider", "boxd");
    assertThat(create.exitCode()).isNotZero();
    assertThat(create.err()).doesNotContain("bxd_wrong");
  }

  @Test
  void aServerOnBoxdServesItsMachinesThroughTheApi() throws Exception {
    Path data = home.resolve("served");
    String key = run("keys", "--data", data.toString(), "create", "--org", "cli").out().strip();
    try (var served = new CloudCli.Served(home, boxd.environment(), "boxd", data)) {
      var client = dev.sandbox4j.remote.RemoteSandbox.builder().url(served.uri()).apiKey(key);
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
      var tooBig = client.memory(1L << 30).build();
      assertThatThrownBy(() -> dev.sandbox4j.workspace.Workspace.of(tooBig.newBackend()).open())
          .hasMessageContaining("memoryBytes: boxd gives each vCPU class its own memory");
    }
  }
}
