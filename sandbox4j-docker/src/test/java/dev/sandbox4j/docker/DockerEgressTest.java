package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Docker sandboxes' network as an attacker inside one sees it, against a real daemon and a fake
 * internet (a network namespace at 198.18.77.2 and 198.19.77.2, benchmarking addresses the proxy
 * counts as public): the egress proxy is the only way out, under the policy, in every state a
 * sandbox can be in (new, forked, paused and resumed, stopped and started, from a snapshot, after
 * its supervisor was killed); the host, other sandboxes and DNS stay out of reach; port URLs reach
 * a server inside.
 */
class DockerEgressTest {
  private static final String TAG = "egress-" + UUID.randomUUID().toString().substring(0, 8);
  private static final String SUFFIX = Long.toString(ProcessHandle.current().pid(), 36);
  private static final String INTERNET = "s4jdtest-" + SUFFIX;
  private static final String HOST_VETH = "s4jd" + SUFFIX;
  static final String SITE_A = "198.18.77.2";
  static final String SITE_B = "198.19.77.2";

  private static DockerSandbox sandboxes;
  private static Process server;
  private static Path hostsFile;
  private static Process hostService;
  private final List<WorkspaceRef> made = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void fakeInternet() throws Exception {
    DockerPrerequisites.requireDaemon();
    Prerequisites.require(DockerNetwork.hostCannot().isEmpty(), "root and nftables");
    Prerequisites.require(Files.isExecutable(Path.of("/usr/bin/python3")), "python3");
    sandboxes = builder().build();
    sh("ip netns add " + INTERNET);
    sh("ip link add " + HOST_VETH + " type veth peer name eth0 netns " + INTERNET);
    sh("ip addr add 198.18.77.1/24 dev " + HOST_VETH);
    sh("ip link set " + HOST_VETH + " up");
    sh("ip route add " + SITE_B + "/32 via " + SITE_A);
    String in = "ip -n " + INTERNET + " ";
    sh(in + "link set lo up");
    sh(in + "addr add " + SITE_A + "/24 dev eth0");
    sh(in + "addr add " + SITE_B + "/32 dev eth0");
    sh(in + "link set eth0 up");
    sh(in + "route add default via 198.18.77.1");
    server =
        new ProcessBuilder(
                "ip", "netns", "exec", INTERNET, "/usr/bin/python3", "-c", echoServer(80))
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
    // a service of the host's own, on every address: no sandbox may reach it
    hostService =
        new ProcessBuilder("/usr/bin/python3", "-c", echoServer(18765))
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
    // the names the proxy resolves (its hosts file comes before the system resolver)
    hostsFile = EgressProxy.hostsFile(DockerHome.of(sandboxes.daemon().host()).dir());
    PrivateFiles.createPrivateDirectories(hostsFile.getParent());
    Files.writeString(
        hostsFile, SITE_A + " allowed.test api.allowed.test\n" + SITE_B + " denied.test\n");
    for (int i = 0; i < 200; i++) {
      if (HostCommand.run(List.of("curl", "-sf", "-m", "1", "http://" + SITE_A + "/")).ok()
          && HostCommand.run(List.of("curl", "-sf", "-m", "1", "http://127.0.0.1:18765/")).ok()) {
        return;
      }
      Thread.sleep(50);
    }
    throw new AssertionError("the fake internet's server did not come up");
  }

  private static String echoServer(int port) {
    return """
        import http.server, socketserver
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = ("site=%s path=%s\\n" % (self.connection.getsockname()[0], self.path)
                        + "".join("%s: %s\\n" % (k, v) for k, v in self.headers.items()))
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            def log_message(self, *a):
                pass
        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
        S(("0.0.0.0", PORT), H).serve_forever()
        """
        .replace("PORT", Integer.toString(port));
  }

  @AfterAll
  static void removeFakeInternet() throws IOException {
    if (server != null) {
      server.destroyForcibly();
    }
    if (hostService != null) {
      hostService.destroyForcibly();
    }
    if (hostsFile != null) {
      Files.deleteIfExists(hostsFile);
    }
    HostCommand.run(List.of("ip", "route", "del", SITE_B + "/32"));
    HostCommand.run(List.of("ip", "netns", "delete", INTERNET));
    if (sandboxes != null) {
      assertThat(DockerPrerequisites.containersLabelled(sandboxes, TAG))
          .as("containers the tests left behind")
          .isEmpty();
      sandboxes.gc();
      assertThat(
              sandboxes
                  .daemon()
                  .client()
                  .listNetworksCmd()
                  .withNameFilter(DockerNetwork.namedNetwork("team-" + SUFFIX))
                  .exec())
          .as("gc removes a named network no sandbox is on")
          .isEmpty();
    }
  }

  @AfterEach
  void destroyOwn() {
    made.forEach(sandboxes::destroy);
  }

  private static DockerSandbox.Builder builder() {
    return DockerSandbox.builder().label("sandbox4j.test", TAG).memory(512L << 20).pids(256);
  }

  private Workspace create(DockerSandbox provider) {
    Workspace ws = Workspace.of(provider.newBackend());
    made.add(ws.open());
    return ws;
  }

  private static void sh(String command) {
    HostCommand.check(List.of("sh", "-c", command));
  }

  private static String run(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    return (r.stdoutText() + r.stderrText()).strip();
  }

  /** The body of a GET from inside (proxy variables honoured), or the HTTP error, or FAILED. */
  static String get(Workspace ws, String url) {
    String py =
        "import urllib.request,urllib.error\n"
            + "try:\n"
            + "  print(urllib.request.urlopen('"
            + url
            + "',timeout=10).read().decode())\n"
            + "except urllib.error.HTTPError as e: print('HTTP %d %s' % (e.code, e.read().decode()))\n"
            + "except Exception as e: print('FAILED %r' % e)\n";
    return ws.run(Command.argv("python3", "-c", py)).stdoutText().strip();
  }

  /** A raw TCP connection from inside: ok, refused, unreachable or timeout. */
  /**
   * "ok", "refused", "unreachable" or "timeout": a blocked connection often times out, and every
   * state of every check pays that wait, so it is 1.5 s; a handshake on a local network answers in
   * milliseconds even on a loaded machine.
   */
  static String connect(Workspace ws, String host, int port) {
    String py =
        "import socket,errno\n"
            + "try:\n"
            + "  socket.create_connection(('"
            + host
            + "',"
            + port
            + "),timeout=1.5); print('ok')\n"
            + "except ConnectionRefusedError: print('refused')\n"
            + "except socket.timeout: print('timeout')\n"
            + "except OSError as e: print('unreachable' if e.errno in (errno.EHOSTUNREACH,"
            + " errno.ENETUNREACH, errno.EACCES, errno.EPERM) else 'error %s' % e)\n";
    return ws.run(Command.argv("python3", "-c", py)).stdoutText().strip();
  }

  private static String gateway() {
    return DockerNetwork.ensure(sandboxes.daemon()).gateway().getHostAddress();
  }

  private static String hostAddress() {
    // the host's address on its default route: reached through the gateway, never allowed
    String route = HostCommand.check(List.of("ip", "-4", "route", "get", "1.1.1.1"));
    String[] words = route.split("\\s+");
    for (int i = 0; i < words.length - 1; i++) {
      if (words[i].equals("src")) {
        return words[i + 1];
      }
    }
    throw new AssertionError("no source address in: " + route);
  }

  private static String address(Workspace ws) {
    return run(ws, "hostname -i").split("\\s+")[0];
  }

  /**
   * What an attacker in {@code ws} tries, and what must hold: the public site through the proxy
   * under the policy {@code all}; nothing of the host (its service on the gateway and on its own
   * address, direct or through the proxy), of {@code other} or of DNS; nothing raw to the site.
   */
  private void confinedWithPolicyAll(Workspace ws, Workspace other, String state) {
    assertThat(get(ws, "http://allowed.test/x"))
        .as("%s: the public internet through the proxy", state)
        .startsWith("site=" + SITE_A + " path=/x");
    assertThat(connect(ws, SITE_A, 80))
        .as("%s: no raw TCP out, only the proxy", state)
        .isIn("unreachable", "refused", "timeout");
    assertThat(connect(ws, gateway(), 18765))
        .as("%s: the host's services on the gateway", state)
        .isIn("unreachable", "refused");
    assertThat(connect(ws, hostAddress(), 18765))
        .as("%s: the host's services on its own address", state)
        .isIn("unreachable", "refused", "timeout");
    assertThat(get(ws, "http://" + hostAddress() + ":18765/"))
        .as("%s: the host through the proxy", state)
        .startsWith("HTTP 403");
    assertThat(get(ws, "http://127.0.0.1:18765/"))
        .as("%s: loopback is the sandbox's own (no proxy), where nothing listens", state)
        .startsWith("FAILED");
    if (other != null) {
      String otherAddress = address(other);
      assertThat(connect(ws, otherAddress, 22))
          .as("%s: another sandbox", state)
          .isIn("unreachable", "refused", "timeout");
      assertThat(get(ws, "http://" + otherAddress + ":8000/"))
          .as("%s: another sandbox through the proxy", state)
          .startsWith("HTTP 403");
    }
    String dns = run(ws, "getent hosts allowed.test || echo unresolved");
    assertThat(dns).as("%s: no name resolves inside (no DNS out)", state).isEqualTo("unresolved");
  }

  @Test
  void theProxyIsTheOnlyWayOutInEveryState() {
    Workspace ws = create(sandboxes);
    Workspace other = create(sandboxes);
    run(other, "nohup python3 -m http.server 8000 >/dev/null 2>&1 &");
    assertThat(sandboxes.egress(ws.open())).isEqualTo(EgressPolicy.all());
    confinedWithPolicyAll(ws, other, "new");

    WorkspaceRef child = sandboxes.fork(ws.open()).ref();
    made.add(child);
    Workspace forked = Workspace.of(sandboxes.backend(child).orElseThrow());
    assertThat(sandboxes.egress(child)).isEqualTo(EgressPolicy.all());
    confinedWithPolicyAll(forked, ws, "forked");

    sandboxes.suspend(ws.open());
    sandboxes.resume(ws.open());
    confinedWithPolicyAll(ws, other, "paused and resumed");

    sandboxes.stop(ws.open());
    sandboxes.start(ws.open());
    confinedWithPolicyAll(ws, other, "stopped and started");

    String snapshot = "egress-" + SUFFIX;
    sandboxes.snapshot(ws.open(), snapshot);
    try {
      DockerSandbox fromSnapshot = builder().snapshot(snapshot).build();
      Workspace restored = create(fromSnapshot);
      confinedWithPolicyAll(restored, other, "from a snapshot");
    } finally {
      sandboxes.removeSnapshot(snapshot);
    }
  }

  @Test
  void namedNetworkMembersReachEachOtherByIdAndNothingElseDoes() {
    String team = "team-" + SUFFIX;
    DockerSandbox onTeam = builder().network(team).build();
    Workspace a = create(onTeam);
    Workspace b = create(onTeam);
    Workspace outsider = create(sandboxes);
    String bId = b.open().id();
    run(b, "nohup python3 -m http.server 8000 >/dev/null 2>&1 &");
    String reached = "";
    for (int i = 0; i < 50 && !reached.equals("ok"); i++) { // until the server listens
      reached = connect(a, bId, 8000);
    }
    assertThat(reached).as("a member reaches another by its id").isEqualTo("ok");
    String bAddress = run(a, "getent hosts " + bId).split("\\s+")[0];
    assertThat(connect(outsider, bAddress, 8000))
        .as("a sandbox not on the network")
        .isIn("unreachable", "refused", "timeout");
    assertThat(connect(outsider, bId, 8000)).as("nor by name").isNotEqualTo("ok");
    String gatewayAddress =
        sandboxes
            .daemon()
            .client()
            .inspectNetworkCmd()
            .withNetworkId(DockerNetwork.namedNetwork(team))
            .exec()
            .getIpam()
            .getConfig()
            .getFirst()
            .getGateway();
    assertThat(connect(a, gatewayAddress, 18765))
        .as("the host's service on the named network's gateway")
        .isIn("unreachable", "refused");
    assertThat(get(a, "http://allowed.test/")).as("egress as before").startsWith("site=" + SITE_A);

    WorkspaceRef child = onTeam.fork(a.open()).ref();
    made.add(child);
    assertThat(connect(Workspace.of(onTeam.backend(child).orElseThrow()), bId, 8000))
        .as("a fork is on its parent's networks")
        .isEqualTo("ok");
    assertThatThrownBy(
            () ->
                Workspace.of(sandboxes.backend(a.open()).orElseThrow()).run(Command.shell("true")))
        .as("a provider built without the network cannot reach into it")
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("refusing to use docker:" + a.open().id())
        .hasMessageContaining("network(\"" + team + "\")");
  }

  @Test
  void anAllowlistLetsOnlyItsNamesOutWithItsHeadersAndChangesAtOnce() {
    DockerSandbox allowing =
        builder()
            .egress(
                EgressPolicy.allow("allowed.test")
                    .withHeader("allowed.test", "X-Api-Key", "secret-42", List.of(80)))
            .build();
    Workspace ws = create(allowing);
    String allowed = get(ws, "http://allowed.test/key");
    assertThat(allowed).startsWith("site=" + SITE_A).contains("X-Api-Key: secret-42");
    assertThat(run(ws, "env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'"))
        .as("the header's secret never enters the sandbox")
        .doesNotContain("secret-42");
    assertThat(get(ws, "http://denied.test/")).startsWith("HTTP 403");
    assertThat(get(ws, "http://" + SITE_B + "/"))
        .as("an address, not a name")
        .startsWith("HTTP 403");

    allowing.setEgress(ws.open(), EgressPolicy.none());
    assertThat(get(ws, "http://allowed.test/")).as("policy none, at once").startsWith("HTTP 403");
    allowing.setEgress(ws.open(), EgressPolicy.allow("denied.test"));
    assertThat(get(ws, "http://denied.test/y")).startsWith("site=" + SITE_B + " path=/y");
    assertThat(get(ws, "http://allowed.test/")).startsWith("HTTP 403");
  }

  @Test
  void noNetworkMeansNoInterfaceButLoopbackAndNoPolicyToChange() {
    DockerSandbox none = builder().noNetwork().build();
    Workspace ws = create(none);
    assertThat(run(ws, "ls /sys/class/net")).isEqualTo("lo");
    assertThat(none.egress(ws.open())).isEqualTo(EgressPolicy.none());
    assertThatThrownBy(() -> none.setEgress(ws.open(), EgressPolicy.all()))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("not on the egress network");
    assertThatThrownBy(() -> none.url(ws.open(), 8000))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("not on the egress network");
  }

  @Test
  void aPortUrlReachesAServerInsideWithItsTokenAndAForwardToo() throws Exception {
    DockerSandbox guarded = builder().portToken(true).build();
    Workspace ws = create(guarded);
    run(ws, "mkdir -p /tmp/www && echo hello-port > /tmp/www/index.html");
    run(ws, "cd /tmp/www && nohup python3 -m http.server 8000 >/dev/null 2>&1 &");
    URI url = guarded.url(ws.open(), 8000);
    String token = guarded.portToken(ws.open()).orElseThrow();
    String ok = "";
    for (int i = 0; i < 100 && !ok.startsWith("200"); i++) { // until the server inside listens
      ok = curl(url.resolve("/index.html"), "-H", "X-Sandbox4j-Token: " + token);
      Thread.sleep(100);
    }
    assertThat(ok).as("through the port URL").isEqualTo("200 hello-port");
    assertThat(curl(url.resolve("/index.html"))).as("without the token").startsWith("401");

    int forwarded = guarded.forwardTcp(ws.open(), 8000);
    assertThat(curl(URI.create("http://127.0.0.1:" + forwarded + "/index.html")))
        .isEqualTo("200 hello-port");
  }

  /** {@code STATUS BODY} of a GET from the host (curl resolves {@code *.localhost} itself). */
  private static String curl(URI url, String... extra) {
    List<String> argv = new ArrayList<>(List.of("curl", "-s", "-m", "10", "-w", "%{http_code}"));
    argv.addAll(List.of(extra));
    argv.addAll(List.of("-o", "/dev/stderr", url.toString()));
    HostCommand.Result r = HostCommand.run(argv);
    return (r.stdout().strip() + " " + r.stderr().strip()).strip();
  }

  @Test
  void aKilledSupervisorComesBackAndTheSandboxesGetOutAgain() throws Exception {
    Workspace ws = create(sandboxes);
    assertThat(get(ws, "http://allowed.test/")).startsWith("site=" + SITE_A);
    DockerHome home = DockerHome.of(sandboxes.daemon().host());
    List<Long> killed = new ArrayList<>();
    ProcessHandle.allProcesses()
        .filter(
            p ->
                p.info().commandLine().orElse("").contains(DockerSupervisor.class.getName())
                    && p.info().commandLine().orElse("").contains(home.dir().toString()))
        .forEach(
            p -> {
              killed.add(p.pid());
              p.destroyForcibly();
            });
    assertThat(killed).as("the daemon's supervisor ran").isNotEmpty();
    for (long pid : killed) {
      ProcessHandle.of(pid).ifPresent(p -> p.onExit().join());
    }
    assertThat(get(ws, "http://allowed.test/"))
        .as("no proxy while no supervisor runs")
        .startsWith("FAILED");
    // any use of a networked sandbox through the API starts it again
    sandboxes.url(ws.open(), 8000);
    String answer = "";
    for (int i = 0; i < 100 && !answer.startsWith("site="); i++) {
      answer = get(ws, "http://allowed.test/");
      Thread.sleep(100);
    }
    assertThat(answer).startsWith("site=" + SITE_A);
  }
}
