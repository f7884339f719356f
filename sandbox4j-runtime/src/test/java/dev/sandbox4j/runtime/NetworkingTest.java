package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.net.Nftables;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Sandbox networking end to end, through real sandboxes: isolation, egress modes, named networks,
 * cleanup. All traffic stays on this machine: the "internet" is a network namespace this test
 * makes, with addresses in 198.18.0.0/15 (public by the engine's rules, reserved for benchmarks in
 * reality) and a small HTTP server in it that says which of its addresses was reached.
 */
class NetworkingTest {
  private static final String SUFFIX = Long.toString(ProcessHandle.current().pid(), 36);
  private static final String INTERNET = "s4jtest-inet-" + SUFFIX;
  private static final String HOST_VETH = "s4ti" + SUFFIX;

  /** A fake public host, and a second one (another "site"). */
  static final String SITE_A = "198.18.0.2";

  static final String SITE_B = "198.19.0.2";

  /** A private address behind the fake internet's router: never reachable in mode ALL. */
  static final String PRIVATE_SITE = "192.168.213.2";

  private static final LocalSandbox SANDBOXES = new LocalSandbox();
  private static Process server;

  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void fakeInternet() throws Exception {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(HostCommand.onPath("ip"), "ip (iproute2)");
    Prerequisites.require(Nftables.unavailable().isEmpty(), "nftables");
    Prerequisites.require(Files.isExecutable(Path.of("/usr/bin/python3")), "python3");
    sh("ip netns add " + INTERNET);
    sh("ip link add " + HOST_VETH + " type veth peer name eth0 netns " + INTERNET);
    sh("ip addr add 198.18.0.1/24 dev " + HOST_VETH);
    sh("ip link set " + HOST_VETH + " up");
    sh("ip route add 198.19.0.0/16 via 198.18.0.2");
    sh("ip route add " + PRIVATE_SITE + "/32 via 198.18.0.2");
    String in = "ip -n " + INTERNET + " ";
    sh(in + "link set lo up");
    sh(in + "addr add 198.18.0.2/24 dev eth0");
    sh(in + "addr add " + SITE_B + "/32 dev eth0");
    sh(in + "addr add " + PRIVATE_SITE + "/32 dev eth0");
    sh(in + "link set eth0 up");
    sh(in + "route add default via 198.18.0.1");
    String script =
        """
        import http.server, socketserver
        class H(http.server.BaseHTTPRequestHandler):
            def handle_one_request(self):
                return super().handle_one_request()
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
        S(("0.0.0.0", 80), H).serve_forever()
        """;
    server =
        new ProcessBuilder("ip", "netns", "exec", INTERNET, "/usr/bin/python3", "-c", script)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
    // The names the egress proxy resolves (its hosts file comes before the system resolver).
    Path hosts = EgressProxy.hostsFile(SANDBOXES.home());
    Files.createDirectories(hosts.getParent());
    Files.writeString(
        hosts, SITE_A + " allowed.test api.allowed.test\n" + SITE_B + " denied.test\n");
    // Ready once the host reaches it.
    for (int i = 0; i < 200; i++) {
      if (HostCommand.run(List.of("curl", "-sf", "-m", "1", "http://" + SITE_A + "/")).ok()) {
        return;
      }
      Thread.sleep(50);
    }
    throw new AssertionError("the fake internet's server did not come up");
  }

  @AfterAll
  static void removeFakeInternet() {
    if (server != null) {
      server.destroyForcibly();
    }
    HostCommand.run(List.of("ip", "route", "del", "198.19.0.0/16"));
    HostCommand.run(List.of("ip", "route", "del", PRIVATE_SITE + "/32"));
    HostCommand.run(List.of("ip", "netns", "delete", INTERNET));
  }

  @AfterEach
  void destroyOwn() {
    for (WorkspaceRef ref : own) {
      SANDBOXES.destroy(ref);
    }
    own.clear();
  }

  private static void sh(String command) {
    HostCommand.check(List.of("sh", "-c", command));
  }

  private Workspace sandbox(LocalSandbox.Builder builder) {
    Workspace ws = Workspace.of(builder.build().newBackend());
    own.add(ws.open());
    return ws;
  }

  private static String address(Workspace ws) {
    return run(ws, "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1").strip();
  }

  private static String run(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    return r.stdoutText() + r.stderrText();
  }

  /**
   * Opens a TCP connection from inside the sandbox; "ok", "refused", "unreachable" (ICMP
   * prohibited) or "timeout" — the last one means a denied connection hung instead of failing.
   */
  static String connect(Workspace ws, String host, int port) {
    String py =
        "import socket,errno\n"
            + "try:\n"
            + "  socket.create_connection(('"
            + host
            + "',"
            + port
            + "),timeout=5); print('ok')\n"
            + "except ConnectionRefusedError: print('refused')\n"
            + "except socket.timeout: print('timeout')\n"
            + "except OSError as e: print('unreachable' if e.errno in (errno.EHOSTUNREACH,"
            + " errno.ENETUNREACH, errno.EACCES, errno.EPERM) else 'error %s' % e)\n";
    return ws.run(Command.argv("python3", "-c", py)).stdoutText().strip();
  }

  /** The body of an HTTP GET from inside the sandbox (proxy variables honoured), or the error. */
  static String get(Workspace ws, String url) {
    String py =
        "import urllib.request,urllib.error,sys\n"
            + "try:\n"
            + "  print(urllib.request.urlopen('"
            + url
            + "',timeout=5).read().decode())\n"
            + "except urllib.error.HTTPError as e: print('HTTP %d %s' % (e.code, e.read().decode()))\n"
            + "except Exception as e: print('FAILED %r' % e)\n";
    return ws.run(Command.argv("python3", "-c", py)).stdoutText().strip();
  }

  private static boolean blocked(String outcome) {
    return outcome.equals("refused") || outcome.equals("unreachable");
  }

  // ---- egress modes -----------------------------------------------------------------------

  @Test
  void modeAllReachesThePublicInternetButNothingPrivateNorTheHostNorAnotherSandbox()
      throws Exception {
    Workspace ws = sandbox(LocalSandbox.builder());
    Workspace other = sandbox(LocalSandbox.builder());
    assertThat(SANDBOXES.egress(ws.open()).mode()).isEqualTo(EgressPolicy.Mode.ALL);
    assertThat(get(ws, "http://" + SITE_A + "/x")).startsWith("site=" + SITE_A + " path=/x");
    assertThat(get(ws, "http://" + SITE_B + "/")).startsWith("site=" + SITE_B);

    try (ServerSocket host = new ServerSocket()) {
      host.bind(new InetSocketAddress("0.0.0.0", 0));
      int port = host.getLocalPort();
      AtomicInteger accepted = new AtomicInteger();
      Thread.ofVirtual()
          .start(
              () -> {
                while (true) {
                  try {
                    host.accept().close();
                    accepted.incrementAndGet();
                  } catch (IOException e) {
                    return;
                  }
                }
              });
      String gateway = SANDBOXES.engine().networks().gateway();
      List<String> hostAddresses = new ArrayList<>(List.of(gateway, "198.18.0.1"));
      for (String a : hostAddresses) {
        assertThat(connect(ws, a, port))
            .as("a server on the host (any address, here %s) is out of reach", a)
            .satisfies(o -> assertThat(blocked(o)).as(o).isTrue());
      }
      // Root in the sandbox has no CAP_NET_ADMIN (Docker's default capabilities): it cannot
      // take another address (to forge a source) nor route 127/8 out of eth0 to reach the host's
      // loopback. The rules on the host do not rely on that, but it closes those tricks early.
      assertThat(run(ws, "sudo ip addr add 10.99.0.7/32 dev eth0"))
          .as("a second address for eth0")
          .contains("Operation not permitted");
      assertThat(
              run(
                  ws,
                  "sudo ip route del local 127.0.0.1 dev lo table local;"
                      + " sudo ip route add 127.0.0.0/8 via "
                      + gateway
                      + " dev eth0 onlink"))
          .as("sending loopback addresses to the host")
          .contains("Operation not permitted");
      assertThat(run(ws, "ip route get 127.0.0.1")).contains("dev lo");
      Thread.sleep(200);
      assertThat(accepted.get()).as("the host's server saw no connection").isZero();
      // Control: the host itself reaches it.
      try (var s = new java.net.Socket("198.18.0.1", port)) {
        assertThat(s.isConnected()).isTrue();
      }
    }

    assertThat(connect(ws, PRIVATE_SITE, 80))
        .as("a private address out there is refused at once, not dropped")
        .isIn("refused", "unreachable");
    run(other, "nohup python3 -m http.server 8080 >/dev/null 2>&1 &");
    String otherAddress = address(other);
    assertThat(otherAddress).isNotBlank().isNotEqualTo(address(ws));
    for (int i = 0; i < 50 && !connect(other, "127.0.0.1", 8080).equals("ok"); i++) {
      Thread.sleep(100);
    }
    assertThat(connect(other, otherAddress, 8080)).as("control: it serves").isEqualTo("ok");
    assertThat(connect(ws, otherAddress, 8080))
        .as("another sandbox is out of reach")
        .isIn("refused", "unreachable");
  }

  @Test
  void modeNoneReachesNothingAndFailsFast() {
    Workspace ws = sandbox(LocalSandbox.builder().egress(EgressPolicy.none()));
    assertThat(connect(ws, SITE_A, 80)).isIn("refused", "unreachable");
    assertThat(connect(ws, SITE_B, 80)).isIn("refused", "unreachable");
    assertThat(connect(ws, SANDBOXES.engine().networks().gateway(), Networks.PROXY_PORT))
        .as("not even the egress proxy")
        .isIn("refused", "unreachable");
    assertThat(SANDBOXES.egress(ws.open()).mode()).isEqualTo(EgressPolicy.Mode.NONE);
    assertThat(SANDBOXES.list())
        .filteredOn(i -> i.ref().equals(ws.open()))
        .singleElement()
        .satisfies(i -> assertThat(i.egress()).isEqualTo("none"));
  }

  @Test
  void aCidrAllowlistReachesThatRangeOnly() {
    Workspace ws =
        sandbox(LocalSandbox.builder().egress(EgressPolicy.allow("198.18.0.0/24", PRIVATE_SITE)));
    assertThat(connect(ws, SITE_A, 80)).isEqualTo("ok");
    assertThat(connect(ws, PRIVATE_SITE, 80))
        .as("a CIDR rule opens even a private address")
        .isEqualTo("ok");
    assertThat(connect(ws, SITE_B, 80)).isIn("refused", "unreachable");
  }

  @Test
  void setEgressTakesEffectWhileItRuns() {
    Workspace ws = sandbox(LocalSandbox.builder().egress(EgressPolicy.none()));
    WorkspaceRef ref = ws.open();
    assertThat(connect(ws, SITE_A, 80)).isIn("refused", "unreachable");
    SANDBOXES.setEgress(ref, EgressPolicy.all());
    assertThat(connect(ws, SITE_A, 80)).isEqualTo("ok");
    assertThat(SANDBOXES.egress(ref).mode()).isEqualTo(EgressPolicy.Mode.ALL);
    SANDBOXES.setEgress(ref, EgressPolicy.allow(SITE_B));
    assertThat(connect(ws, SITE_A, 80)).isIn("refused", "unreachable");
    assertThat(connect(ws, SITE_B, 80)).isEqualTo("ok");
  }

  @Test
  void theWayOutComesBackAfterStopStartAndHibernate() {
    Workspace ws = sandbox(LocalSandbox.builder().egress(EgressPolicy.allow(SITE_A)));
    WorkspaceRef ref = ws.open();
    String address = address(ws);
    SANDBOXES.stop(ref);
    SANDBOXES.start(ref);
    assertThat(address(ws)).isEqualTo(address);
    assertThat(connect(ws, SITE_A, 80)).isEqualTo("ok");
    assertThat(connect(ws, SITE_B, 80)).isIn("refused", "unreachable");
    if (Checkpoints.unavailable(SANDBOXES.engine().runtime()).isEmpty()) {
      run(ws, "nohup sleep 600 >/dev/null 2>&1 &");
      SANDBOXES.hibernate(ref);
      assertThat(connect(ws, SITE_A, 80)).as("restored, with its veth anew").isEqualTo("ok");
      assertThat(connect(ws, SITE_B, 80)).isIn("refused", "unreachable");
      assertThat(run(ws, "pgrep -c sleep").strip()).isEqualTo("1");
    }
    assertThat(namespaces(SANDBOXES.engine().networks()))
        .filteredOn(n -> n.endsWith(ref.id()))
        .hasSize(1);
    Prerequisites.requireCheckpointRestore(SANDBOXES.engine().runtime(), "the hibernate half");
  }

  @Test
  void aLiveForkGetsItsOwnAddressAndItsParentsPolicy() {
    Workspace parent = sandbox(LocalSandbox.builder().egress(EgressPolicy.allow(SITE_B)));
    run(parent, "nohup sleep 600 >/dev/null 2>&1 &");
    ForkResult fork = SANDBOXES.fork(parent.open());
    own.add(fork.ref());
    Workspace child = Workspace.of(SANDBOXES.backend(fork.ref()).orElseThrow());
    assertThat(address(child)).isNotBlank().isNotEqualTo(address(parent));
    assertThat(SANDBOXES.egress(fork.ref()).cidrs()).containsExactly(SITE_B + "/32");
    assertThat(connect(child, SITE_B, 80)).isEqualTo("ok");
    assertThat(connect(child, SITE_A, 80)).isIn("refused", "unreachable");
    assertThat(connect(parent, SITE_B, 80)).as("the parent keeps its way out").isEqualTo("ok");
  }

  // ---- domain rules, through the egress proxy -----------------------------------------------

  /** Waits until the home's egress proxy (in the supervisor, started on create) accepts. */
  private static void awaitProxy(Workspace ws) throws InterruptedException {
    String gateway = SANDBOXES.engine().networks().gateway();
    for (int i = 0; i < 150; i++) {
      if (connect(ws, gateway, Networks.PROXY_PORT).equals("ok")) {
        return;
      }
      Thread.sleep(100);
    }
    throw new AssertionError("the egress proxy did not come up: see supervisor.log in the home");
  }

  /** What the proxy answers to {@code CONNECT target}, then (if tunnelled) to a GET through it. */
  private static String connectThroughProxy(Workspace ws, String target) {
    String gateway = SANDBOXES.engine().networks().gateway();
    String py =
        "import socket\n"
            + "s=socket.create_connection(('"
            + gateway
            + "',"
            + Networks.PROXY_PORT
            + "),timeout=5)\n"
            + "s.sendall(b'CONNECT "
            + target
            + " HTTP/1.1\\r\\nHost: "
            + target
            + "\\r\\n\\r\\n')\n"
            + "head=s.recv(4096).decode(errors='replace')\n"
            + "print(head.split('\\r\\n')[0])\n"
            + "if ' 200' in head.split('\\r\\n')[0]:\n"
            + "  s.sendall(b'GET /tunnelled HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\n"
            + "  data=b''\n"
            + "  while True:\n"
            + "    b=s.recv(65536)\n"
            + "    if not b: break\n"
            + "    data+=b\n"
            + "  print(data.decode(errors='replace'))\n";
    return ws.run(Command.argv("python3", "-c", py)).stdoutText();
  }

  @Test
  void aDomainAllowlistReachesTheAllowedHostThroughTheProxyAndNothingElse() throws Exception {
    Workspace ws = sandbox(LocalSandbox.builder().egress(EgressPolicy.allow("*.allowed.test")));
    awaitProxy(ws);
    assertThat(run(ws, "echo $HTTP_PROXY")).contains(Networks.PROXY_PORT + "");
    assertThat(get(ws, "http://api.allowed.test/x")).startsWith("site=" + SITE_A + " path=/x");
    assertThat(get(ws, "http://denied.test/")).startsWith("HTTP 403").contains("denied.test");
    assertThat(get(ws, "http://allowed.test/"))
        .as("*.allowed.test does not match allowed.test itself")
        .startsWith("HTTP 403");
    assertThat(get(ws, "http://" + SITE_A + "/"))
        .as("an IP literal through the proxy needs a CIDR rule")
        .startsWith("HTTP 403");
    assertThat(connect(ws, SITE_A, 80))
        .as("around the proxy, straight to the address: refused at once")
        .isIn("refused", "unreachable");
    assertThat(connectThroughProxy(ws, "denied.test:80")).contains(" 403");
    assertThat(connectThroughProxy(ws, "api.allowed.test:80"))
        .contains(" 200")
        .contains("site=" + SITE_A + " path=/tunnelled");
  }

  @Test
  void anInjectedHeaderReachesTheApiWhileTheSecretNeverEntersTheSandbox() throws Exception {
    String secret = "s3cr3t-" + Long.toString(System.nanoTime(), 36) + "-" + SUFFIX;
    Workspace ws =
        sandbox(
            LocalSandbox.builder()
                .egress(
                    EgressPolicy.allow("api.allowed.test")
                        .withHeader(
                            "api.allowed.test", "Authorization", "Bearer " + secret, List.of(80))));
    awaitProxy(ws);
    assertThat(get(ws, "http://api.allowed.test/v1"))
        .startsWith("site=" + SITE_A + " path=/v1")
        .containsIgnoringCase("Authorization: Bearer " + secret);
    assertThat(get(ws, "http://denied.test/")).startsWith("HTTP 403").doesNotContain(secret);
    assertThat(SANDBOXES.egress(ws.open()).toString()).doesNotContain(secret);

    assertThat(run(ws, "env; sudo env")).doesNotContain(secret);
    assertThat(
            run(ws, "sudo sh -c 'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline' | tr '\\0' '\\n'"))
        .doesNotContain(secret);
    String grep =
        run(
            ws,
            "sudo grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -F '"
                + secret
                + "' / ; echo GREP-DONE");
    assertThat(grep).as("no file in the sandbox holds the secret").isEqualTo("GREP-DONE\n");
    Path upper = SandboxDisk.upper(SANDBOXES.home().resolve("sandboxes").resolve(ws.open().id()));
    try (var files = Files.walk(upper)) {
      for (Path f : files.filter(Files::isRegularFile).toList()) {
        assertThat(Files.readString(f, java.nio.charset.StandardCharsets.ISO_8859_1))
            .as("the upper layer's %s", f)
            .doesNotContain(secret);
      }
    }
    Path policy =
        SANDBOXES.home().resolve("sandboxes").resolve(ws.open().id()).resolve("egress.json");
    assertThat(Files.getPosixFilePermissions(policy))
        .as("the policy file on the host, with the secret, is root's only")
        .containsExactlyInAnyOrder(
            java.nio.file.attribute.PosixFilePermission.OWNER_READ,
            java.nio.file.attribute.PosixFilePermission.OWNER_WRITE);
  }

  @Test
  void anInterceptingPolicyInstallsTheProxysCaIntoTheSandboxsTrustStore() throws Exception {
    Workspace ws = sandbox(LocalSandbox.builder().egress(EgressPolicy.none()));
    String ca = EgressProxy.caCertificatePem(SANDBOXES.home());
    String body = ca.lines().filter(l -> !l.startsWith("-----")).findFirst().orElseThrow();
    assertThat(run(ws, "grep -c '" + body + "' /etc/ssl/certs/ca-certificates.crt"))
        .startsWith("0");
    SANDBOXES.setEgress(
        ws.open(),
        EgressPolicy.allow("api.allowed.test")
            .withHeader("api.allowed.test", "X-Key", "k", List.of(80))
            .withInterceptTls(true));
    assertThat(run(ws, "grep -c '" + body + "' /etc/ssl/certs/ca-certificates.crt"))
        .startsWith("1");
    assertThat(run(ws, "echo $NODE_EXTRA_CA_CERTS; cat $NODE_EXTRA_CA_CERTS")).contains(body);
    // OpenSSL's hashed directory finds it too (a self-signed CA verifies against itself there),
    // and installing it again (a second intercepting policy) does not add it twice.
    assertThat(run(ws, "openssl verify -CApath /etc/ssl/certs $NODE_EXTRA_CA_CERTS"))
        .endsWith(": OK\n");
    SANDBOXES.setEgress(
        ws.open(),
        EgressPolicy.allow("api.allowed.test")
            .withHeader("api.allowed.test", "X-Key", "k", List.of(80))
            .withInterceptTls(true));
    assertThat(run(ws, "grep -c '" + body + "' /etc/ssl/certs/ca-certificates.crt"))
        .startsWith("1");
    awaitProxy(ws);
    assertThat(get(ws, "http://api.allowed.test/h")).containsIgnoringCase("X-Key: k");
  }

  // ---- named networks ---------------------------------------------------------------------

  @Test
  void sandboxesOnANamedNetworkTalkByNameAndAnIsolatedOneReachesNeither() throws Exception {
    String net = "t" + SUFFIX;
    LocalSandbox onNet = LocalSandbox.builder().network(net).build();
    Workspace a = Workspace.of(onNet.newBackend());
    own.add(a.open());
    Workspace b = Workspace.of(onNet.newBackend());
    WorkspaceRef refB = b.open();
    own.add(refB);
    Workspace isolated = sandbox(LocalSandbox.builder());
    run(b, "nohup python3 -m http.server 8080 >/dev/null 2>&1 &");
    for (int i = 0; i < 50 && !connect(b, "127.0.0.1", 8080).equals("ok"); i++) {
      Thread.sleep(100);
    }
    String nameB = refB.id();
    assertThat(connect(a, nameB, 8080)).as("a reaches b by its id as host name").isEqualTo("ok");
    assertThat(run(b, "getent hosts " + a.open().id())).contains(address(a));
    assertThat(connect(isolated, address(b), 8080)).isIn("refused", "unreachable");
    assertThat(connect(b, address(isolated), 22)).isIn("refused", "unreachable");
    assertThat(SANDBOXES.list())
        .filteredOn(i -> i.ref().equals(refB))
        .singleElement()
        .satisfies(i -> assertThat(i.networks()).containsExactly(net));

    // The isolated-only API refuses machines on a named network; one built with it may.
    assertThatThrownBy(
            () -> Workspace.of(SANDBOXES.backend(refB).orElseThrow()).run(Command.shell("true")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("named network " + net);
    assertThatThrownBy(() -> SANDBOXES.forkFiles(refB))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("named network " + net);
    assertThat(
            Workspace.of(onNet.backend(refB).orElseThrow()).run(Command.shell("true")).exitCode())
        .isZero();

    // A fork joins its parent's network, under its own name; a live one carries b's server.
    if (Checkpoints.unavailable(SANDBOXES.engine().runtime()).isEmpty()) {
      ForkResult live = onNet.fork(refB);
      own.add(live.ref());
      assertThat(live.processesCopied()).as(live.reason()).isTrue();
      Workspace liveFork = Workspace.of(onNet.backend(live.ref()).orElseThrow());
      assertThat(run(liveFork, "getent hosts " + a.open().id())).contains(address(a));
      assertThat(connect(a, live.ref().id(), 8080)).as("b's server, carried").isEqualTo("ok");
    }
    ForkResult fork = onNet.forkFiles(refB);
    own.add(fork.ref());
    Workspace forked = Workspace.of(onNet.backend(fork.ref()).orElseThrow());
    run(forked, "nohup python3 -m http.server 8080 >/dev/null 2>&1 &");
    for (int i = 0; i < 50 && !connect(forked, "127.0.0.1", 8080).equals("ok"); i++) {
      Thread.sleep(100);
    }
    assertThat(address(forked)).isNotEqualTo(address(b));
    assertThat(connect(a, fork.ref().id(), 8080)).isEqualTo("ok");

    // A snapshot keeps its machine's networks: a sandbox made from it joins them.
    String snapshot = "net-" + SUFFIX;
    onNet.snapshot(refB, snapshot);
    try {
      Workspace fromSnapshot = sandbox(LocalSandbox.builder().snapshot(snapshot).network(net));
      assertThat(SANDBOXES.list())
          .filteredOn(i -> i.ref().equals(fromSnapshot.open()))
          .singleElement()
          .satisfies(i -> assertThat(i.networks()).containsExactly(net));
      Workspace plain = sandbox(LocalSandbox.builder().snapshot(snapshot));
      assertThat(SANDBOXES.list())
          .filteredOn(i -> i.ref().equals(plain.open()))
          .singleElement()
          .satisfies(i -> assertThat(i.networks()).containsExactly(net));
      assertThat(connect(plain, refB.id(), 8080))
          .as("on the network: it reaches b's server by b's name")
          .isEqualTo("ok");
    } finally {
      own.forEach(SANDBOXES::destroy);
      own.clear();
      SANDBOXES.removeSnapshot(snapshot);
    }
    Prerequisites.requireCheckpointRestore(SANDBOXES.engine().runtime(), "the live-fork half");
  }

  // ---- cleanup ----------------------------------------------------------------------------

  @Test
  void destroyRemovesEveryRuleAndLink() {
    Networks networks = SANDBOXES.engine().networks();
    Workspace warm = sandbox(LocalSandbox.builder()); // the table and gateway exist from here
    int rules = ruleCount(networks);
    List<String> links = links(networks);
    List<String> namespaces = namespaces(networks);
    WorkspaceRef ref =
        Workspace.of(
                LocalSandbox.builder()
                    .egress(EgressPolicy.allow("198.18.0.0/24"))
                    .network("d" + SUFFIX)
                    .build()
                    .newBackend())
            .open();
    assertThat(ruleCount(networks)).isGreaterThan(rules);
    assertThat(links(networks)).hasSize(links.size() + 1);
    assertThat(namespaces(networks)).hasSize(namespaces.size() + 1);
    SANDBOXES.destroy(ref);
    assertThat(ruleCount(networks)).isEqualTo(rules);
    assertThat(links(networks)).isEqualTo(links);
    assertThat(namespaces(networks)).isEqualTo(namespaces);
    assertThat(warm.run(Command.shell("true")).exitCode()).isZero();
  }

  @Test
  void gcRemovesTheNetworkLeftoversOfACreateKilledMidway() throws Exception {
    Networks networks = SANDBOXES.engine().networks();
    Workspace warm = sandbox(LocalSandbox.builder()); // the table exists from here
    Path slots = SANDBOXES.home().resolve("network").resolve("slots");
    int rules = ruleCount(networks);
    List<String> links = links(networks);
    List<String> namespaces = namespaces(networks);
    List<String> slotsBefore = names(slots);
    String killed = null;
    for (int attempt = 0; attempt < 6 && killed == null; attempt++) {
      List<String> argv =
          List.of(
              ProcessHandle.current().info().command().orElse("java"),
              "--enable-native-access=ALL-UNNAMED",
              "-cp",
              System.getProperty("java.class.path"),
              CrashChild.class.getName(),
              SANDBOXES.home().toString(),
              "net-" + SUFFIX,
              "create");
      Process child =
          new ProcessBuilder(argv)
              .redirectErrorStream(true)
              .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
              .start();
      var out =
          new java.io.BufferedReader(
              new java.io.InputStreamReader(
                  child.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
      for (String line = out.readLine(); line != null && !line.equals("READY"); ) {
        line = out.readLine();
      }
      Thread.ofVirtual().start(() -> out.lines().forEach(l -> {}));
      // Killed once it has its address, a little later each attempt: somewhere in its network's
      // setup or the container's start.
      String id = null;
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (id == null && child.isAlive() && System.nanoTime() < deadline) {
        for (String slot : names(slots)) {
          if (!slotsBefore.contains(slot)) {
            // the slot file is created, then its id written: an empty one is not there yet
            String written;
            try {
              written = Files.readString(slots.resolve(slot)).strip();
            } catch (java.nio.file.NoSuchFileException gone) {
              written = ""; // freed again: another sandbox's, or one that failed
            }
            id = written.isEmpty() ? null : written;
          }
        }
      }
      Thread.sleep(5L * attempt);
      child.destroyForcibly().waitFor();
      if (id == null || id.isEmpty()) {
        continue;
      }
      Path state = SANDBOXES.home().resolve("sandboxes").resolve(id).resolve("state.json");
      if (Files.exists(state)
          && SandboxRecord.read(state).status() == SandboxRecord.Status.RUNNING) {
        SANDBOXES.destroy(new WorkspaceRef(LocalSandbox.NAME, id)); // finished before the kill
        continue;
      }
      killed = id;
    }
    String victim = killed;
    assertThat(victim).as("a create killed before it finished").isNotNull();
    String before = leftoversOf(victim);
    List<String> removed = SANDBOXES.gc();
    assertThat(removed)
        .as(
            "gc of the killed create's %s (before gc: %s; after: %s)",
            victim, before, leftoversOf(victim))
        .anyMatch(l -> l.contains(victim));
    assertThat(ruleCount(networks)).isEqualTo(rules);
    assertThat(links(networks)).isEqualTo(links);
    assertThat(namespaces(networks)).isEqualTo(namespaces);
    assertThat(names(slots)).isEqualTo(slotsBefore);
    assertThat(warm.run(Command.shell("true")).exitCode()).isZero();
  }

  /** What is left of sandbox {@code id} on disk: its directory's entries, record and lock. */
  private static String leftoversOf(String id) throws IOException {
    Path sandboxes = SANDBOXES.home().resolve("sandboxes");
    StringBuilder found = new StringBuilder();
    for (String name : names(sandboxes)) {
      if (!name.contains(id)) {
        continue;
      }
      Path dir = sandboxes.resolve(name);
      Path state = dir.resolve("state.json");
      found.append(name).append(' ').append(names(dir));
      if (Files.exists(state)) {
        found.append(" record ").append(Files.readString(state).strip());
      }
      try {
        var lock =
            dev.sandbox4j.runtime.internal.util.FileLock.tryAcquireExisting(dir.resolve("lock"));
        found.append(lock.isPresent() ? " lock free" : " lock held");
        if (lock.isPresent()) {
          lock.get().close();
        }
      } catch (IOException e) {
        found.append(" lock: ").append(e);
      }
      found.append("; ");
    }
    return found.isEmpty() ? "nothing" : found.toString();
  }

  private static List<String> names(Path dir) throws IOException {
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (var s = Files.list(dir)) {
      return s.map(p -> p.getFileName().toString()).sorted().toList();
    }
  }

  /** Rules and map/set elements in the home's table. */
  static int ruleCount(Networks networks) {
    String listing = Nftables.run("list table inet " + networks.table());
    int n = 0;
    for (String line : listing.split("\n")) {
      String l = line.strip();
      if (!l.isEmpty()
          && !l.startsWith("chain ")
          && !l.startsWith("set ")
          && !l.startsWith("map ")
          && !l.startsWith("table ")
          && !l.startsWith("type ")
          && !l.startsWith("flags ")
          && !l.equals("}")) {
        n += l.split(",").length;
      }
    }
    return n;
  }

  /**
   * The host's network links of the home of {@code networks} (named {@code s4<hash>-<slot>}): other
   * homes on this host create and remove theirs meanwhile.
   */
  static List<String> links(Networks networks) {
    String vethZero = networks.vethName(0);
    String prefix = vethZero.substring(0, vethZero.length() - 1);
    try (var s = Files.list(Path.of("/sys/class/net"))) {
      return s.map(p -> p.getFileName().toString())
          .filter(n -> n.startsWith(prefix))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** The named network namespaces of the home of {@code networks} ({@code s4j-<hash>-<id>}). */
  static List<String> namespaces(Networks networks) {
    String prefix = networks.netnsName("");
    Path dir = Path.of("/run/netns");
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (var s = Files.list(dir)) {
      return s.map(p -> p.getFileName().toString())
          .filter(n -> n.startsWith(prefix))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  void aSubnetReclaimedFromADeletedHomeTakesThatHomesLeftoverTableAlong() throws Exception {
    Path tmp = Files.createTempDirectory("s4j-reclaim");
    try {
      Path gone = tmp.resolve("gone-home");
      Networks old = new Networks(gone);
      int subnet = old.subnet();
      Nftables.run("add table inet " + old.table());
      assertThat(Nftables.run("list tables")).contains(old.table());
      Trees.delete(gone);

      Path next = tmp.resolve("next-home");
      Files.createDirectories(next.resolve("network"));
      Files.writeString(next.resolve("network").resolve("subnet"), subnet + "\n");
      Networks reclaiming = new Networks(next);
      assertThat(reclaiming.subnet()).as("the gone home's /16 is taken over").isEqualTo(subnet);
      assertThat(Nftables.run("list tables"))
          .as("the gone home's table went with its claim")
          .doesNotContain(old.table());
    } finally {
      Trees.delete(tmp);
    }
  }
}
