package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.internal.oci.Gvisor;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerKeys;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI against a real sandbox4j server on loopback, in-process: with {@code SANDBOX4J_URL} (or
 * {@code --server}) and {@code SANDBOX4J_API_KEY}, the machine commands act on the server's
 * sandboxes with the same output as locally; the agent commands (demo, run) use them too.
 */
class RemoteCliTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern REF = Pattern.compile("remote:[A-Za-z0-9_-]+");
  private static final Pattern SANDBOX_LINE = Pattern.compile("Sandbox: (remote:[A-Za-z0-9_-]+)");

  private static Path data;
  private static SandboxServer server;
  private static String key;

  private final List<String> created = new ArrayList<>();

  @TempDir Path temp;

  record Run(int exitCode, String out, String err) {}

  @BeforeAll
  static void startServer() throws IOException {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun"))
            || Files.isExecutable(Path.of("/usr/bin/crun")),
        "crun (sandbox4j setup)");
    data = Files.createTempDirectory("sandbox4j-cli-remote-");
    try (ServerKeys keys = ServerKeys.open(data)) {
      key = keys.create("cli-test").key();
    }
    server =
        SandboxServer.builder()
            .engine(LocalSandbox.builder().build())
            .dataDirectory(data)
            .bind("127.0.0.1", 0)
            .requestLog(line -> {})
            // tests create sandboxes faster than the default create rate allows
            .maxSandboxesPerOrganization(1000)
            .createRateLimit(1000, java.time.Duration.ofMillis(1))
            .build()
            .start();
  }

  @AfterAll
  static void stopServer() {
    if (server != null) {
      server.close();
    }
  }

  @AfterEach
  void destroyWhatTheTestCreated() {
    if (!created.isEmpty()) {
      List<String> args = new ArrayList<>(List.of("rm"));
      args.addAll(created);
      Run rm = run(args.toArray(String[]::new));
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
  }

  private Run run(String... args) {
    return runWith(new byte[0], serverEnv(), args);
  }

  private static Map<String, String> serverEnv() {
    return Map.of("SANDBOX4J_URL", server.uri().toString(), "SANDBOX4J_API_KEY", key);
  }

  private Run runWith(byte[] stdin, Map<String, String> env, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    InputStream in = new ByteArrayInputStream(stdin);
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(temp, in, o, e, env), args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private String create(String... options) {
    List<String> args = new ArrayList<>(List.of("create"));
    args.addAll(List.of(options));
    Run r = run(args.toArray(String[]::new));
    assertThat(r.exitCode()).as(r.err()).isZero();
    String ref = r.out().strip();
    assertThat(ref).matches(REF);
    created.add(ref);
    return ref;
  }

  private String sandboxOf(Run r) {
    Matcher m = SANDBOX_LINE.matcher(r.err());
    assertThat(m.find()).as(r.err()).isTrue();
    if (!created.contains(m.group(1))) {
      created.add(m.group(1));
    }
    return m.group(1);
  }

  @Test
  void isolationGoesToTheServerAndLsShowsIt() throws Exception {
    Prerequisites.require(
        Gvisor.unavailable().isEmpty(), Gvisor.unavailable().orElse("gVisor's runsc"));
    String ref = create("--isolation", "gvisor");

    Run uname = run("exec", ref, "--", "uname", "-r");
    assertThat(uname.exitCode()).as(uname.err()).isZero();
    assertThat(uname.out()).as("gVisor's kernel").isEqualTo("4.4.0\n");
    JsonNode listed = JSON.readTree(run("ls", "--json").out());
    assertThat(listed)
        .anySatisfy(
            row -> {
              assertThat("remote:" + row.get("id").asText()).isEqualTo(ref);
              assertThat(row.get("isolation").asText()).isEqualTo("gvisor");
            });
  }

  @Test
  void createOptionsAServersSandboxCannotTakeAreRefusedNotDropped() {
    Run egress = run("create", "--egress", "none");
    assertThat(egress.exitCode()).as(egress.err()).isEqualTo(ExitCodes.USAGE);
    assertThat(egress.err())
        .contains("--egress is not supported for a sandbox on a server")
        .contains("sandbox4j egress REF");
    Run others = run("create", "--network", "team", "--port-token");
    assertThat(others.exitCode()).as(others.err()).isEqualTo(ExitCodes.USAGE);
    assertThat(others.err())
        .contains("--port-token, --network are not supported for a sandbox on a server");
  }

  @Test
  void createExecAndLsWorkOnTheServersSandboxes() throws Exception {
    String ref = create("--label", "team=cli");
    String id = ref.substring("remote:".length());

    Run exec = run("exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3");
    assertThat(exec.exitCode()).isEqualTo(3);
    assertThat(exec.out()).isEqualTo("out\n");
    assertThat(exec.err()).isEqualTo("err\n");

    String withEnv = create("--env", "GREETING=kept by the server");
    Run env = run("exec", "--shell", withEnv, "--", "echo \"$GREETING\"");
    assertThat(env.out())
        .as("a server keeps a sandbox's env for every command")
        .isEqualTo("kept by the server\n");

    Run loop = run("exec", "--shell", ref, "--", "for i in 1 2 3; do echo $i; done");
    assertThat(loop.out())
        .as("the script reaches the sandbox's shell unexpanded")
        .isEqualTo("1\n2\n3\n");

    Run workdir = run("exec", "--workdir", "/tmp", ref, "--", "pwd");
    assertThat(workdir.exitCode()).as(workdir.err()).isZero();
    assertThat(workdir.out()).isEqualTo("/tmp\n");

    Run ls = run("ls");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    assertThat(ls.out().lines().findFirst().orElseThrow())
        .startsWith("REF")
        .contains("STATE", "IMAGE", "CREATED", "ENDS", "LABELS");
    assertThat(ls.out())
        .containsPattern(Pattern.quote(ref) + "\\s+running\\s+default\\s+.*team=cli");

    JsonNode listed = JSON.readTree(run("ls", "--json").out());
    JsonNode mine = null;
    for (JsonNode row : listed) {
      if (row.get("id").asText().equals(id)) {
        mine = row;
      }
    }
    assertThat(mine).as(listed.toString()).isNotNull();
    assertThat(mine.get("provider").asText()).isEqualTo("remote");
    assertThat(mine.get("state").asText()).isEqualTo("running");
    assertThat(mine.get("labels").get("team").asText()).isEqualTo("cli");
    assertThat(fieldNames(mine))
        .as("a server's sandbox shows the common fields, none of the local engine's own")
        .containsExactly(
            "provider",
            "id",
            "state",
            "image",
            "isolation",
            "created",
            "labels",
            "cpus",
            "memoryBytes",
            "pids",
            "timers",
            "ends");
    assertThat(mine.get("isolation").asText()).isEqualTo("container");
  }

  @Test
  void execNewStdinTimeoutAndAGoneSandboxBehaveAsLocally() {
    Run fresh =
        runWith(
            "piped\n".getBytes(StandardCharsets.UTF_8),
            serverEnv(),
            "exec",
            "--stdin",
            "new",
            "--",
            "cat");
    Matcher m =
        Pattern.compile("Created remote sandbox (" + REF.pattern() + ")").matcher(fresh.err());
    assertThat(m.find()).as(fresh.err()).isTrue();
    String ref = m.group(1);
    created.add(ref);
    assertThat(fresh.exitCode()).isZero();
    assertThat(fresh.out()).isEqualTo("piped\n");

    Run slow = run("exec", "--timeout", "1s", ref, "--", "sh", "-c", "echo partial; sleep 30");
    assertThat(slow.exitCode()).isEqualTo(ExitCodes.TIMEOUT);
    assertThat(slow.out()).isEqualTo("partial\n");
    assertThat(slow.err()).contains("command timed out after 1s");

    Run rm = run("rm", ref);
    assertThat(rm.out()).isEqualTo(ref + "\n");
    created.remove(ref);
    Run gone = run("exec", ref, "--", "true");
    assertThat(gone.exitCode()).isEqualTo(ExitCodes.UNAVAILABLE);
    assertThat(gone.err()).contains(ref);
    assertThat(run("rm", ref).exitCode()).as("rm of a gone sandbox is fine").isZero();
  }

  @Test
  void cpCopiesBothWays() throws Exception {
    String ref = create();
    Path local = temp.resolve("in.bin");
    byte[] bytes = new byte[300_000];
    new java.util.Random(7).nextBytes(bytes);
    Files.write(local, bytes);

    Run up = run("cp", local.toString(), ref + ":/tmp/in.bin");
    assertThat(up.exitCode()).as(up.err()).isZero();
    Run down = run("cp", ref + ":/tmp/in.bin", temp.resolve("out.bin").toString());
    assertThat(down.exitCode()).as(down.err()).isZero();
    assertThat(Files.readAllBytes(temp.resolve("out.bin"))).isEqualTo(bytes);
  }

  @Test
  void egressWorksOnTheServersSandboxesAndPortsSayTheyAreLocalOnly() {
    String ref = create();
    Run shown = run("egress", ref);
    assertThat(shown.exitCode()).as(shown.err()).isZero();
    assertThat(shown.out()).isEqualTo("EgressPolicy[all]\n");
    Run set = run("egress", ref, "api.example.com", "--header", "api.example.com:X-Key:remote-v");
    assertThat(set.exitCode()).as(set.err()).isZero();
    assertThat(run("egress", ref).out())
        .contains("allowlist", "api.example.com", "X-Key")
        .doesNotContain("remote-v");
    Run bad = run("egress", ref, "127.0.0.0/8");
    assertThat(bad.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(bad.err()).contains("lies inside 127.0.0.0/8");

    Run url = run("url", ref, "8080");
    assertThat(url.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(url.err()).contains("is a remote workspace: it has no port URLs");
  }

  @Test
  void stateCommandsForkAndSnapshotsWork() throws Exception {
    String ref = create();
    assertThat(run("exec", ref, "--", "sh", "-c", "echo parent > note").exitCode()).isZero();

    for (String change : List.of("suspend", "resume", "stop", "start")) {
      Run r = run(change, ref);
      assertThat(r.exitCode()).as(change + ": " + r.err()).isZero();
      assertThat(r.out()).isEqualTo(ref + "\n");
    }
    Run hibernated = run("hibernate", ref);
    assertThat(hibernated.exitCode()).as(hibernated.err()).isZero();
    assertThat(hibernated.out()).isEqualTo(ref + "\n");
    assertThat(run("ls").out()).containsPattern(Pattern.quote(ref) + "\\s+hibernated");
    assertThat(run("exec", ref, "--", "cat", "note").out()).isEqualTo("parent\n");

    Run stopped = run("stop", ref);
    assertThat(stopped.exitCode()).isZero();
    assertThat(run("ls").out()).containsPattern(Pattern.quote(ref) + "\\s+stopped");

    Run fork = run("fork", "--files-only", "--json", ref);
    assertThat(fork.exitCode()).as(fork.err()).isZero();
    JsonNode forked = JSON.readTree(fork.out());
    String child = forked.get("provider").asText() + ":" + forked.get("id").asText();
    created.add(child);
    assertThat(child).matches(REF).isNotEqualTo(ref);
    assertThat(forked.get("processesCopied").asBoolean()).isFalse();
    assertThat(run("exec", child, "--", "cat", "note").out()).isEqualTo("parent\n");

    String name = "cli-snap-" + Long.toString(System.nanoTime(), 36);
    Run snap = run("snapshot", ref, name);
    assertThat(snap.exitCode()).as(snap.err()).isZero();
    assertThat(snap.out()).isEqualTo(name + "\n");
    Run snaps = run("snapshot", "ls");
    assertThat(snaps.out()).startsWith("NAME").contains(name);
    String fromSnapshot = create("--snapshot", name);
    assertThat(run("exec", fromSnapshot, "--", "cat", "note").out()).isEqualTo("parent\n");
    Run removed = run("snapshot", "rm", name);
    assertThat(removed.out()).isEqualTo(name + "\n");
    assertThat(run("snapshot", "ls").out()).doesNotContain(name);
  }

  @Test
  void shellWithoutATerminalReadsCommandsFromStdin() {
    String ref = create();
    Run shell =
        runWith(
            "echo \"in $0\"\ncd /tmp && pwd\nexit 4\n".getBytes(StandardCharsets.UTF_8),
            serverEnv(),
            "shell",
            ref);
    assertThat(shell.exitCode()).as(shell.err()).isEqualTo(4);
    assertThat(shell.out()).isEqualTo("in bash\n/tmp\n");
  }

  @Test
  void theServerOptionWorksWithoutTheUrlVariableAndAMissingKeyIsAUsageError() {
    Run ls =
        runWith(
            new byte[0],
            Map.of("SANDBOX4J_API_KEY", key),
            "--server",
            server.uri().toString(),
            "ls",
            "--json");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    assertThat(ls.out()).startsWith("[");

    Run noKey = runWith(new byte[0], Map.of("SANDBOX4J_URL", server.uri().toString()), "create");
    assertThat(noKey.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(noKey.err()).contains("SANDBOX4J_API_KEY");

    Run wrongKey =
        runWith(
            new byte[0],
            Map.of("SANDBOX4J_URL", server.uri().toString(), "SANDBOX4J_API_KEY", "s4j_wrong"),
            "ls",
            "--provider",
            "remote");
    assertThat(wrongKey.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(wrongKey.err()).contains("refused the API key").doesNotContain("s4j_wrong");
  }

  @Test
  void demoRunsTheAgentsToolsInARemoteSandbox() {
    Path history = temp.resolve("demo.json");
    Run demo = run("demo", "--history", history.toString());
    assertThat(demo.exitCode()).as(demo.err()).isZero();
    String ref = sandboxOf(demo);
    assertThat(demo.err()).contains("FAILED (failures=1)").contains("\n  │ OK\n");
    assertThat(run("exec", ref, "--", "cat", "calc.py").out())
        .isEqualTo("def add(a, b):\n    return a + b\n");
  }

  @Test
  void aRunWithHistoryContinuesInTheSameRemoteSandbox() {
    Path history = temp.resolve("h.json");
    Run first = run("run", "--model", "test", "--history", history.toString(), "look around");
    assertThat(first.exitCode()).as(first.err()).isZero();
    String ref = sandboxOf(first);

    Run second = run("run", "--model", "test", "--history", history.toString(), "again");
    assertThat(second.exitCode()).as(second.err()).isZero();
    assertThat(sandboxOf(second)).isEqualTo(ref);
    Run cat = run("exec", ref, "--", "cat", "a");
    assertThat(cat.out()).as(cat.err() + "\nfirst run:\n" + first.err()).isEqualTo("a");
  }

  private static List<String> fieldNames(JsonNode node) {
    List<String> names = new ArrayList<>();
    node.fieldNames().forEachRemaining(names::add);
    return names;
  }
}
