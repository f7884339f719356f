package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.net.ForwardingFirewall;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The local engine on a host where {@code dockerd} runs with its defaults. Docker, when it is the
 * one that switches IPv4 forwarding on, sets iptables' {@code FORWARD} policy to DROP, which used
 * to make named networks and default egress time out. {@code .ci/run} starts dockerd that way
 * ({@code ip_forward=0} first), so in CI the whole suite runs under Docker's DROP; this test shows
 * that the engine's two ACCEPT rules ({@link ForwardingFirewall}) are what keeps it working: two
 * sandboxes on a named network talk, stop talking without the rules, and talk again once the engine
 * has put them back.
 */
class DockerForwardPolicyTest {
  private static final String NETWORK = "fw" + UUID.randomUUID().toString().substring(0, 6);
  private final List<WorkspaceRef> own = new ArrayList<>();
  private final LocalSandbox sandboxes = LocalSandbox.builder().network(NETWORK).build();

  @AfterEach
  void cleanUp() {
    ForwardingFirewall.ensureAccepted(); // whatever happened, the host keeps working
    own.forEach(sandboxes::destroy);
  }

  @Test
  void sandboxesTalkPastDockersDropPolicyThanksToTheEnginesRules() throws Exception {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(
        ForwardingFirewall.forwardPolicyDrops(),
        "iptables' FORWARD policy set to DROP by dockerd (.ci/run starts it with ip_forward=0)");
    Workspace server = Workspace.of(sandboxes.newBackend());
    Workspace client = Workspace.of(sandboxes.newBackend());
    own.add(server.open());
    own.add(client.open());
    server.run(Command.shell("nohup python3 -m http.server 8080 >/dev/null 2>&1 &"));
    String name = server.open().id();
    String first = "";
    for (int i = 0;
        i < 50 && !(first = NetworkingTest.connect(client, name, 8080)).equals("ok");
        i++) {
      Thread.sleep(100); // the server is starting: "refused" until it listens
    }
    assertThat(first).as("with the engine's rules, under Docker's DROP").isEqualTo("ok");

    ForwardingFirewall.remove();
    assertThat(NetworkingTest.connect(client, name, 8080))
        .as("without them, Docker's policy drops the forwarded packets")
        .isEqualTo("timeout");
    assertThat(ForwardingFirewall.check().ok()).as("doctor says so").isFalse();

    assertThat(ForwardingFirewall.ensureAccepted()).hasSize(2);
    assertThat(ForwardingFirewall.ensureAccepted()).as("idempotent").isEmpty();
    assertThat(NetworkingTest.connect(client, name, 8080)).isEqualTo("ok");
    assertThat(ForwardingFirewall.check().ok()).isTrue();
  }
}
