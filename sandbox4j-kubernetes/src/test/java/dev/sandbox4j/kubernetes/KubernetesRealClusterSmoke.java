package dev.sandbox4j.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A smoke subset of the workspace contract against a REAL cluster, configured as kubectl is
 * (KUBECONFIG, ~/.kube/config or in-cluster). Not a CI test: its name does not end in {@code Test},
 * so surefire runs it only when named ({@code -Dtest=KubernetesRealClusterSmoke}), as {@code
 * docs/kubernetes.md}'s script does. {@code -Dsandbox4j.k8s.namespace} (default {@code default})
 * and {@code -Dsandbox4j.k8s.mode} (auto, sandbox or pod) choose where.
 */
class KubernetesRealClusterSmoke {

  private static KubernetesSandbox provider() {
    return KubernetesSandbox.builder()
        .namespace(System.getProperty("sandbox4j.k8s.namespace", "default"))
        .mode(
            KubernetesSandbox.Mode.valueOf(
                System.getProperty("sandbox4j.k8s.mode", "auto").toUpperCase()))
        .owner("sandbox4j-smoke")
        .build();
  }

  @Test
  void smoke() throws Exception {
    try (KubernetesSandbox provider = provider()) {
      Workspace ws = Workspace.of(provider.newBackend());
      WorkspaceRef ref = null;
      try {
        assertThat(ws.run(Command.shell("echo hello")).stdoutText()).isEqualTo("hello\n");
        ref = ws.ref().orElseThrow();
        assertThat(ws.run(Command.shell("exit 7")).exitCode()).isEqualTo(7);
        assertThat(ws.run(Command.argv(List.of("no-such-program"))).exitCode()).isEqualTo(127);
        assertThat(
                ws.run(
                        Command.argv(List.of("cat")),
                        RunOptions.builder().stdin(new byte[] {0, 1, 2, (byte) 255}).build())
                    .stdout())
            .containsExactly(0, 1, 2, 255);
        ws.writeText("dir/file.txt", "content");
        assertThat(ws.readText("dir/file.txt")).isEqualTo("content");
        assertThatThrownBy(
                () ->
                    ws.run(
                        Command.shell("setsid sleep 300 & sleep 300"),
                        RunOptions.builder().timeout(Duration.ofSeconds(2)).build()))
            .isInstanceOf(WorkspaceTimeoutException.class);
        assertThat(ws.run(Command.shell("pgrep -c sleep || true")).stdoutText().trim())
            .isIn("0", "");
      } finally {
        if (ref != null) {
          provider.destroy(ref);
          WorkspaceRef gone = ref;
          assertThatThrownBy(
                  () ->
                      Workspace.of(provider.backend(gone).orElseThrow()).run(Command.shell("true")))
              .isInstanceOf(WorkspaceUnavailableException.class);
        }
      }
    }
  }
}
