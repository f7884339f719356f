package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.net.Nftables;
import dev.sandbox4j.runtime.internal.ports.PortTokens;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A sandbox as an attacker with the widest CIDR rules there are, in real sandboxes: whatever its
 * policy says, it reaches neither the host (its loopback, its other addresses, the gateway's
 * ports), nor another sandbox, nor the egress proxy or the port proxy, neither through the egress
 * proxy nor around it. Such rules cannot be built through the API (the errors name the range), so
 * the attacker's policy is one stored on disk before they were refused, read back as the engine
 * reads old records.
 */
class EgressConfinementTest {
  private static final LocalSandbox SANDBOXES = new LocalSandbox();
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Every CIDR rule as wide as it can be written, plus names so that the proxy serves it. */
  static final List<String> WIDEST =
      List.of(
          "0.0.0.0/0",
          "127.0.0.0/8",
          "10.64.0.0/10",
          "169.254.0.0/16",
          "::/0",
          "localhost",
          "*.localhost",
          "*.test");

  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void prerequisites() {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(HostCommand.onPath("ip"), "ip (iproute2)");
    Prerequisites.require(Nftables.unavailable().isEmpty(), "nftables");
  }

  @AfterEach
  void destroyOwn() {
    for (WorkspaceRef ref : own) {
      SANDBOXES.destroy(ref);
    }
    own.clear();
  }

  static EgressPolicy stored(List<String> rules) {
    StringBuilder json = new StringBuilder("{\"mode\":\"allowlist\",\"allow\":[");
    for (int i = 0; i < rules.size(); i++) {
      json.append(i == 0 ? "" : ",").append('"').append(rules.get(i)).append('"');
    }
    return EgressPolicy.fromJson(json.append("]}").toString());
  }

  @Test
  void theApiRefusesTheseRulesNamingTheRangeAndNarrowsTheWidestOnes() {
    for (String rule : List.of("127.0.0.0/8", "10.64.0.0/10", "169.254.0.0/16")) {
      assertThatThrownBy(() -> EgressPolicy.allow(rule))
          .as(rule)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("egress rule '" + rule + "' lies inside " + rule + " (");
    }
    String gatewaySubnet = "10." + SANDBOXES.engine().networks().subnet() + ".0.0/16";
    assertThatThrownBy(() -> EgressPolicy.allow(gatewaySubnet))
        .hasMessageContaining("lies inside 10.64.0.0/10 (the engine's own range");
    EgressPolicy wide = EgressPolicy.allow("0.0.0.0/0", "::/0");
    assertThat(wide.narrowings()).hasSize(2);
    assertThat(wide.narrowings().getFirst())
        .contains("127.0.0.0/8", "169.254.0.0/16", "10.64.0.0/10", "0.0.0.0/8");
  }

  @Test
  void theWidestRulesReachNeitherTheHostNorAnotherSandboxNorTheProxies() throws Exception {
    Networks networks = SANDBOXES.engine().networks();
    // A service on every address of the host, IPv4 and IPv6: it must never see a connection.
    AtomicInteger accepted = new AtomicInteger();
    try (ServerSocket hostService = new ServerSocket()) {
      hostService.bind(new InetSocketAddress(0));
      int hostPort = hostService.getLocalPort();
      Thread.ofVirtual()
          .start(
              () -> {
                while (true) {
                  try (Socket s = hostService.accept()) {
                    accepted.incrementAndGet();
                    s.getOutputStream()
                        .write(
                            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nHOST"
                                .getBytes(StandardCharsets.US_ASCII));
                  } catch (IOException e) {
                    return;
                  }
                }
              });

      // The victim: another sandbox with a server and a tokened port URL.
      Workspace victim = sandbox(LocalSandbox.builder().portToken(true));
      WorkspaceRef victimRef = victim.open();
      run(victim, "nohup python3 -m http.server 8080 >/dev/null 2>&1 &");
      String victimAddress = address(victim);
      for (int i = 0;
          i < 50 && !NetworkingTest.connect(victim, "127.0.0.1", 8080).equals("ok");
          i++) {
        Thread.sleep(100);
      }
      String token = SANDBOXES.portToken(victimRef).orElseThrow();
      java.net.URI url = SANDBOXES.url(victimRef, 8080);
      int portProxy = url.getPort();
      assertThat(hostGet(portProxy, url.getHost() + ":" + portProxy, token))
          .as("control: the host reaches the victim's port URL")
          .matches("(?s)HTTP/1\\.[01] 200 .*");

      // The attacker.
      Workspace attacker = sandbox(LocalSandbox.builder().egress(stored(WIDEST)));
      String gateway = networks.gateway();
      awaitProxy(attacker, gateway);

      List<String> targets = new ArrayList<>();
      targets.add("127.0.0.1:" + hostPort);
      targets.add("127.0.0.1:" + portProxy);
      targets.add("127.1:" + hostPort);
      targets.add("0.0.0.0:" + hostPort);
      targets.add("localhost:" + hostPort);
      targets.add("[::1]:" + hostPort);
      targets.add("[::]:" + hostPort);
      targets.add("[::ffff:127.0.0.1]:" + hostPort);
      targets.add("[64:ff9b::7f00:1]:" + hostPort);
      targets.add(gateway + ":" + hostPort);
      targets.add(gateway + ":" + portProxy);
      targets.add(gateway + ":" + Networks.PROXY_PORT);
      targets.add(victimAddress + ":8080");
      targets.add("169.254.169.254:80");
      for (String a : hostAddresses()) {
        targets.add(a + ":" + hostPort);
      }
      Map<String, String> requests = new LinkedHashMap<>();
      for (String t : targets) {
        requests.put("CONNECT " + t, "CONNECT " + t + " HTTP/1.1\r\nHost: " + t + "\r\n\r\n");
        requests.put(
            "GET " + t,
            "GET http://" + t + "/ HTTP/1.1\r\nHost: " + t + "\r\nConnection: close\r\n\r\n");
      }
      String portHost = url.getHost() + ":" + portProxy;
      requests.put(
          "GET port URL",
          "GET http://"
              + portHost
              + "/?s4j_token="
              + token
              + " HTTP/1.1\r\nHost: "
              + portHost
              + "\r\nConnection: close\r\n\r\n");
      requests.put(
          "CONNECT port URL",
          "CONNECT " + portHost + " HTTP/1.1\r\nHost: " + portHost + "\r\n\r\n");

      // Names that resolve to what no policy opens (the proxy's hosts file stands in for DNS).
      Path hostsFile = EgressProxy.hostsFile(SANDBOXES.home());
      String hostsBefore = Files.exists(hostsFile) ? Files.readString(hostsFile) : null;
      Files.createDirectories(hostsFile.getParent());
      Files.writeString(
          hostsFile,
          (hostsBefore == null ? "" : hostsBefore)
              + "\n127.0.0.1 loopback.test\n"
              + victimAddress
              + " victim.test\n"
              + gateway
              + " gateway.test\n::1 loopback6.test\n");
      for (String t :
          List.of(
              "loopback.test:" + hostPort,
              "loopback6.test:" + hostPort,
              "victim.test:8080",
              "gateway.test:" + Networks.PROXY_PORT)) {
        requests.put("CONNECT " + t, "CONNECT " + t + " HTTP/1.1\r\nHost: " + t + "\r\n\r\n");
      }
      JsonNode answers;
      try {
        answers = throughProxy(attacker, gateway, requests);
      } finally {
        if (hostsBefore == null) {
          Files.deleteIfExists(hostsFile);
        } else {
          Files.writeString(hostsFile, hostsBefore);
        }
      }
      for (var e : requests.entrySet()) {
        JsonNode a = answers.path(e.getKey());
        assertThat(a.path("status").asText())
            .as("%s through the egress proxy: %s", e.getKey(), a)
            .startsWith("HTTP/1.1 403");
        assertThat(a.path("body").asText())
            .as(e.getKey())
            .containsAnyOf("no egress policy opens", "sandbox4j egress policy denies");
      }

      // Around the proxy, straight to the address.
      Map<String, String> direct = new LinkedHashMap<>();
      direct.put("the victim's server", NetworkingTest.connect(attacker, victimAddress, 8080));
      direct.put("the port proxy", NetworkingTest.connect(attacker, gateway, portProxy));
      direct.put(
          "the host service on the gateway", NetworkingTest.connect(attacker, gateway, hostPort));
      for (String a : hostAddresses()) {
        direct.put("the host service on " + a, NetworkingTest.connect(attacker, a, hostPort));
      }
      direct.forEach(
          (what, outcome) ->
              assertThat(outcome).as("directly to %s", what).isIn("refused", "unreachable"));

      // Changing the policy while it runs (setEgress) opens nothing either.
      SANDBOXES.setEgress(attacker.open(), stored(List.of("10.64.0.0/10", "0.0.0.0/0")));
      assertThat(NetworkingTest.connect(attacker, victimAddress, 8080))
          .as("after setEgress, the victim directly")
          .isIn("refused", "unreachable");

      Thread.sleep(200);
      assertThat(accepted.get()).as("connections the host's service saw").isZero();
      assertThat(hostGet(portProxy, url.getHost() + ":" + portProxy, token))
          .as("control: the victim still serves the host")
          .matches("(?s)HTTP/1\\.[01] 200 .*");
    }
  }

  // ---- helpers ----

  private Workspace sandbox(LocalSandbox.Builder builder) {
    Workspace ws = Workspace.of(builder.build().newBackend());
    own.add(ws.open());
    return ws;
  }

  private static String run(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    return r.stdoutText() + r.stderrText();
  }

  private static String address(Workspace ws) {
    return run(ws, "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1").strip();
  }

  /** The host's own IPv4 addresses but loopback: a server on any of them is the host's. */
  private static List<String> hostAddresses() throws IOException {
    List<String> out = new ArrayList<>();
    for (NetworkInterface nic : NetworkInterface.networkInterfaces().toList()) {
      for (InetAddress a : nic.inetAddresses().toList()) {
        if (a instanceof Inet4Address && !a.isLoopbackAddress()) {
          out.add(a.getHostAddress());
        }
      }
    }
    return out;
  }

  private static void awaitProxy(Workspace ws, String gateway) throws InterruptedException {
    for (int i = 0; i < 150; i++) {
      if (NetworkingTest.connect(ws, gateway, Networks.PROXY_PORT).equals("ok")) {
        return;
      }
      Thread.sleep(100);
    }
    throw new AssertionError("the egress proxy did not come up: see supervisor.log in the home");
  }

  /**
   * Sends each raw request to the egress proxy from inside {@code ws}, on a connection of its own;
   * answers {name: {status, body}} (a tunnel that opens is closed at once).
   */
  private static JsonNode throughProxy(Workspace ws, String gateway, Map<String, String> requests)
      throws IOException {
    String py =
        """
        import json, socket, sys
        gw, port, reqs = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
        out = {}
        for name, raw in reqs.items():
            try:
                s = socket.create_connection((gw, port), timeout=15)
                s.sendall(raw.encode())
                data = b''
                while b'\\r\\n\\r\\n' not in data:
                    b = s.recv(65536)
                    if not b: break
                    data += b
                head, _, body = data.partition(b'\\r\\n\\r\\n')
                status = head.split(b'\\r\\n')[0].decode(errors='replace')
                if ' 200 ' not in status:
                    while True:
                        b = s.recv(65536)
                        if not b: break
                        body += b
                s.close()
                out[name] = {'status': status, 'body': body.decode(errors='replace')}
            except Exception as e:
                out[name] = {'status': 'FAILED %r' % e, 'body': ''}
        print(json.dumps(out))
        """;
    CommandResult r =
        ws.run(
            Command.argv(
                "python3",
                "-c",
                py,
                gateway,
                Integer.toString(Networks.PROXY_PORT),
                JSON.writeValueAsString(requests)));
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
    return JSON.readTree(r.stdoutText());
  }

  /**
   * A GET of the port URL from the host, with the token: the response. Waits for the supervisor
   * that {@link LocalSandbox#url} started to bind the port proxy.
   */
  private static String hostGet(int portProxy, String host, String token)
      throws IOException, InterruptedException {
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (true) {
      try {
        return hostGetOnce(portProxy, host, token);
      } catch (java.net.ConnectException notYet) {
        if (System.nanoTime() > deadline) {
          throw notYet;
        }
        Thread.sleep(100);
      }
    }
  }

  private static String hostGetOnce(int portProxy, String host, String token) throws IOException {
    try (Socket s = new Socket("127.0.0.1", portProxy)) {
      s.setSoTimeout(30_000);
      s.getOutputStream()
          .write(
              ("GET / HTTP/1.1\r\nHost: "
                      + host
                      + "\r\n"
                      + PortTokens.TOKEN_HEADER
                      + ": "
                      + token
                      + "\r\nConnection: close\r\n\r\n")
                  .getBytes(StandardCharsets.US_ASCII));
      InputStream in = s.getInputStream();
      return new String(in.readAllBytes(), StandardCharsets.ISO_8859_1);
    }
  }
}
