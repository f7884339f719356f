package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI over real local sandboxes (root, crun, a prepared host), in-process. Uses the engine's
 * shared state directory, so the default image is built once per machine; every sandbox a test
 * creates is destroyed after it.
 */
class LocalCliTest {

  private static final Path HOME =
      Path.of(Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"));
  private static final Pattern CREATED = Pattern.compile("Created local sandbox (local:[a-z0-9]+)");
  private static final ObjectMapper JSON = new ObjectMapper();

  private final List<String> created = new ArrayList<>();

  @TempDir Path temp;

  record Run(int exitCode, String out, byte[] outBytes, String err) {}

  @BeforeAll
  static void requireTheLocalEngine() {
    require(System.getProperty("os.name").equals("Linux"), "Linux");
    require("root".equals(System.getProperty("user.name")), "root");
    require(
        Files.isExecutable(Path.of("/usr/bin/crun"))
            || Files.isExecutable(Path.of("/usr/local/bin/crun")),
        "crun (sandbox4j setup)");
    Run build = run(new byte[0], "--quiet", "image", "build");
    assertThat(build.exitCode()).as(build.err()).isZero();
    assertThat(build.out()).isEqualTo("default\n");
  }

  private static void require(boolean ok, String what) {
    Prerequisites.require(ok, what);
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

  private static Run run(byte[] stdin, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    InputStream in = new ByteArrayInputStream(stdin);
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(HOME, in, o, e), args);
    }
    return new Run(
        code,
        out.toString(StandardCharsets.UTF_8),
        out.toByteArray(),
        err.toString(StandardCharsets.UTF_8));
  }

  private static Run run(String... args) {
    return run(new byte[0], args);
  }

  private String create(String... options) {
    List<String> args = new ArrayList<>(List.of("create"));
    args.addAll(List.of(options));
    Run r = run(args.toArray(String[]::new));
    assertThat(r.exitCode()).as(r.err()).isZero();
    String ref = r.out().strip();
    assertThat(ref).matches("local:[a-z0-9]+");
    created.add(ref);
    return ref;
  }

  private static final Pattern SANDBOX_LINE = Pattern.compile("Sandbox: (local:[a-z0-9]+)");

  private String sandboxOf(Run r) {
    Matcher m = SANDBOX_LINE.matcher(r.err());
    assertThat(m.find()).as(r.err()).isTrue();
    created.add(m.group(1));
    return m.group(1);
  }

  @Test
  void demoFixesTheBugInARealSandboxAndSaysItIsScripted() throws Exception {
    Path history = temp.resolve("demo.json");
    Run demo = run("demo", "--history", history.toString());
    assertThat(demo.exitCode()).as(demo.err()).isZero();
    String ref = sandboxOf(demo);
    assertThat(demo.err())
        .contains("a SCRIPTED model plays the agent (no AI provider is called)")
        .contains("FAILED (failures=1)")
        .contains("- return a - b")
        .contains("+ return a + b")
        .contains("\n  │ OK\n");
    assertThat(demo.out())
        .contains("The test fails (AssertionError: -1 != 5)")
        .endsWith(
            "Fixed: add() in calc.py subtracted its arguments; it adds them now, and the"
                + " test passes.\n");
    Run cat = run("exec", ref, "--", "cat", "calc.py");
    assertThat(cat.out()).isEqualTo("def add(a, b):\n    return a + b\n");
    assertThat(Files.readString(history)).contains(ref.substring("local:".length()));
  }

  @Test
  void runWithHistoryContinuesInTheSameSandboxAndWorkspaceNewStartsAnother() {
    Path history = temp.resolve("h.json");
    // the test model calls every Coder tool once with placeholder arguments, then reports them
    Run first = run("run", "--model", "test", "--history", history.toString(), "look around");
    assertThat(first.exitCode()).as(first.err()).isZero();
    String ref = sandboxOf(first);
    assertThat(first.out()).contains("\"write_file\"");

    Run second = run("run", "--model", "test", "--history", history.toString(), "again");
    assertThat(second.exitCode()).as(second.err()).isZero();
    assertThat(sandboxOf(second)).isEqualTo(ref);
    // run 1's write_file wrote "a" into the file "a"; run 2 reads the same machine
    Run cat = run("exec", ref, "--", "cat", "a");
    assertThat(cat.out()).isEqualTo("a");

    Run fresh =
        run("run", "--model", "test", "--history", history.toString(), "--workspace", "new", "x");
    assertThat(fresh.exitCode()).as(fresh.err()).isZero();
    assertThat(sandboxOf(fresh)).isNotEqualTo(ref);
  }

  @Test
  void execNewRunsInAFreshIsolatedSandboxAndExitsWithTheCommandsCode() {
    Run r = run("exec", "new", "--", "sh", "-c", "echo \"hello from $(hostname)\"; id -u; exit 3");

    Matcher m = CREATED.matcher(r.err());
    assertThat(m.find()).as(r.err()).isTrue();
    created.add(m.group(1));
    String id = m.group(1).substring("local:".length());
    assertThat(r.exitCode()).as(r.err()).isEqualTo(3);
    assertThat(r.out()).isEqualTo("hello from " + id + "\n1000\n");
    assertThat(r.err()).as("local sandboxes isolate: no warning").doesNotContain("warning");
  }

  @Test
  void aBareIdAndTheFullRefReachTheSameSandbox() {
    String ref = create();
    String id = ref.substring("local:".length());

    Run write = run("exec", id, "--", "sh", "-c", "echo kept > note.txt");
    assertThat(write.exitCode()).as(write.err()).isZero();
    Run read = run("exec", ref, "--", "cat", "/home/sandbox/note.txt");
    assertThat(read.exitCode()).as(read.err()).isZero();
    assertThat(read.out()).isEqualTo("kept\n");
  }

  @Test
  void createWithDiskBoundsWhatTheSandboxCanWrite() {
    String ref = create("--disk", "64M", "--disk-inodes", "2048");

    Run big = run("exec", ref, "--", "sh", "-c", "head -c 200M /dev/zero > /tmp/big");
    assertThat(big.exitCode()).as("a 200 MiB write into a 64 MiB disk").isNotZero();
    assertThat(big.err()).contains("No space left on device");
    Run many =
        run(
            "exec",
            ref,
            "--",
            "sh",
            "-c",
            "rm /tmp/big && mkdir /tmp/m && cd /tmp/m && i=0; while [ $i -lt 3000 ]; do touch f$i || break;"
                + " i=$((i+1)); done; echo $i");
    assertThat(Integer.parseInt(many.out().strip())).as(many.err()).isLessThan(2100);
    assertThat(many.err()).contains("No space left on device");

    Run bad = run("create", "--disk", "1M");
    assertThat(bad.exitCode()).isNotZero();
    assertThat(bad.err()).contains("disk must be from 64 MiB");
  }

  @Test
  void createWithLabelsAndLimitsShowsThemInLs() throws Exception {
    String ref = create("--label", "purpose=cli-test", "--label", "team=x", "--cpus", "2");
    String id = ref.substring("local:".length());

    Run ls = run("ls", "--json");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    JsonNode mine = null;
    for (JsonNode node : JSON.readTree(ls.out())) {
      if (node.path("id").asText().equals(id)) {
        mine = node;
      }
    }
    assertThat(mine).as(ls.out()).isNotNull();
    assertThat(mine.path("provider").asText()).isEqualTo("local");
    assertThat(mine.path("state").asText()).isEqualTo("running");
    assertThat(mine.path("image").asText()).isEqualTo("default");
    assertThat(mine.path("isolation").asText()).isEqualTo("container");
    assertThat(mine.path("created").asText()).matches("\\d{4}-\\d\\d-\\d\\dT.*Z");
    assertThat(mine.path("labels").path("purpose").asText()).isEqualTo("cli-test");
    assertThat(mine.path("labels").path("team").asText()).isEqualTo("x");
    assertThat(mine.path("cpus").asInt()).isEqualTo(2);
    List<String> fields = new ArrayList<>();
    mine.fieldNames().forEachRemaining(fields::add);
    assertThat(fields)
        .as("the common fields, then the local engine's own")
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
            "ends",
            "egress",
            "networks",
            "portUrl",
            "diskBytes",
            "diskInodes");

    Run table = run("ls", "--provider", "local");
    assertThat(table.out().lines().toList())
        .first()
        .asString()
        .matches("REF +STATE +IMAGE +ISOLATION +CREATED +ENDS +LABELS +EGRESS +NETWORKS +URL");
    assertThat(table.out())
        .containsPattern(
            ref
                + " +running +default +container +\\S+Z +\\S+Z +purpose=cli-test,team=x +all +- +http://\\{port\\}-"
                + id
                + "\\.localhost:[0-9]+/");
    assertThat(mine.path("portUrl").asText())
        .matches("http://\\{port\\}-" + id + "\\.localhost:\\d+/");
  }

  @Test
  void urlAndForwardPrintWhereASandboxPortIsServed() throws Exception {
    String ref = create("--port-token");
    String id = ref.substring("local:".length());
    Run url = run("url", id, "8080");
    assertThat(url.exitCode()).as(url.err()).isZero();
    assertThat(url.out()).matches("http://8080-" + id + "\\.localhost:\\d+/\n");
    Run withToken = run("url", ref, "8080", "--with-token", "--token");
    assertThat(withToken.out())
        .matches(
            "http://8080-"
                + id
                + "\\.localhost:\\d+/\\?s4j_token=[A-Za-z0-9_-]{43}\n[A-Za-z0-9_-]{43}\n");
    Run forward = run("forward", id, "8080");
    assertThat(forward.exitCode()).as(forward.err()).isZero();
    assertThat(forward.out()).matches("127\\.0\\.0\\.1:\\d+\n");
    assertThat(run("forward", id, "8080").out()).isEqualTo(forward.out());

    JsonNode urlJson = JSON.readTree(run("url", ref, "8080", "--json").out());
    assertThat(urlJson.path("provider").asText()).isEqualTo("local");
    assertThat(urlJson.path("id").asText()).isEqualTo(id);
    assertThat(urlJson.path("port").asInt()).isEqualTo(8080);
    assertThat(urlJson.path("url").asText()).isEqualTo(url.out().strip());
    assertThat(urlJson.path("token").isNull()).as("a secret only when asked for").isTrue();
    JsonNode tokenJson = JSON.readTree(run("url", ref, "8080", "--json", "--with-token").out());
    String[] textLines = withToken.out().split("\n");
    assertThat(tokenJson.path("url").asText()).isEqualTo(textLines[0]);
    assertThat(tokenJson.path("token").asText()).isEqualTo(textLines[1]);
    JsonNode forwardJson = JSON.readTree(run("forward", ref, "8080", "--json").out());
    assertThat(forwardJson.path("id").asText()).isEqualTo(id);
    assertThat(forwardJson.path("port").asInt()).isEqualTo(8080);
    assertThat(forwardJson.path("host").asText()).isEqualTo("127.0.0.1");
    assertThat("127.0.0.1:" + forwardJson.path("hostPort").asInt())
        .isEqualTo(forward.out().strip());

    Run bad = run("url", id, "70000");
    assertThat(bad.exitCode()).isNotZero();
    assertThat(bad.err()).contains("PORT must be from 1 to 65535");
  }

  @Test
  void createWithEgressAndANetworkShowsThemAndEgressChangesThePolicy() throws Exception {
    String ref =
        create(
            "--egress",
            "198.51.100.0/24,api.example.com",
            "--header",
            "api.example.com:Authorization:Bearer cli-secret",
            "--network",
            "cli-net");
    String id = ref.substring("local:".length());
    JsonNode mine = null;
    for (JsonNode node : JSON.readTree(run("ls", "--json").out())) {
      if (node.path("id").asText().equals(id)) {
        mine = node;
      }
    }
    assertThat(mine).isNotNull();
    assertThat(mine.path("egress").asText()).isEqualTo("allowlist");
    assertThat(mine.path("networks").get(0).asText()).isEqualTo("cli-net");

    Run shown = run("egress", ref);
    assertThat(shown.exitCode()).as(shown.err()).isZero();
    assertThat(shown.out())
        .contains("allowlist", "api.example.com", "198.51.100.0/24", "Authorization")
        .doesNotContain("cli-secret");
    Run shownJson = run("egress", ref, "--json");
    assertThat(shownJson.exitCode()).as(shownJson.err()).isZero();
    assertThat(shownJson.out()).doesNotContain("cli-secret");
    JsonNode rules = JSON.readTree(shownJson.out());
    assertThat(rules.path("mode").asText()).isEqualTo("allowlist");
    List<String> allowed = new ArrayList<>();
    rules.path("allow").forEach(a -> allowed.add(a.asText()));
    assertThat(allowed).containsExactlyInAnyOrder("198.51.100.0/24", "api.example.com");
    assertThat(rules.path("headers").get(0).path("domain").asText()).isEqualTo("api.example.com");
    assertThat(rules.path("headers").get(0).path("name").asText()).isEqualTo("Authorization");
    assertThat(rules.path("headers").get(0).has("value")).isFalse();
    assertThat(rules.path("interceptTls").asBoolean()).isFalse();
    Run exec = run("exec", ref, "--", "sh", "-c", "echo $HTTPS_PROXY; env | grep -c cli-secret");
    assertThat(exec.out()).as("the CLI reaches into a named network").contains(":3128");
    assertThat(exec.out()).doesNotContain("cli-secret").endsWith("0\n");

    assertThat(run("egress", ref, "none").exitCode()).isZero();
    assertThat(run("egress", ref).out()).contains("none");
    Run bad = run("egress", ref, "not a domain!");
    assertThat(bad.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(bad.err()).contains("not a domain!");

    // Header rules name their ports; TLS interception is a flag.
    Run ported =
        run(
            "egress",
            ref,
            "api.example.com",
            "--header",
            "api.example.com/8080,80:X-Port:v",
            "--header",
            "api.example.com:X-Tls:w",
            "--intercept-tls");
    assertThat(ported.exitCode()).as(ported.err()).isZero();
    assertThat(ported.out()).isEqualTo(ref + "\n");
    Run setJson = run("egress", ref, "all", "--json");
    assertThat(setJson.exitCode()).as(setJson.err()).isZero();
    JsonNode nowInForce = JSON.readTree(setJson.out());
    assertThat(nowInForce.path("mode").asText()).isEqualTo("all");
    assertThat(nowInForce.path("allow").size()).isZero();
    assertThat(nowInForce.path("headers").size()).isZero();
    assertThat(run("egress", ref).out()).contains("all");
    assertThat(
            run(
                    "egress",
                    ref,
                    "api.example.com",
                    "--header",
                    "api.example.com/8080,80:X-Port:v",
                    "--header",
                    "api.example.com:X-Tls:w",
                    "--intercept-tls")
                .exitCode())
        .isZero();
    assertThat(run("egress", ref).out())
        .contains(
            "api.example.com ports [80, 8080] X-Port", "api.example.com X-Tls", "interceptTls")
        .doesNotContain(": v", ": w");
    JsonNode ports = JSON.readTree(run("egress", ref, "--json").out());
    assertThat(ports.path("interceptTls").asBoolean()).isTrue();
    assertThat(ports.path("headers").findValuesAsText("name")).contains("X-Port", "X-Tls");
    for (JsonNode header : ports.path("headers")) {
      if (header.path("name").asText().equals("X-Port")) {
        assertThat(header.path("ports").toString()).isEqualTo("[80,8080]");
      }
    }
    Run badPorts = run("egress", ref, "api.example.com", "--header", "api.example.com/x:N:v");
    assertThat(badPorts.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(badPorts.err()).contains("--header ports must be");

    // What no policy opens: refused naming the range, or narrowed with a note.
    Run loopback = run("egress", ref, "127.0.0.0/8");
    assertThat(loopback.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(loopback.err()).contains("'127.0.0.0/8' lies inside 127.0.0.0/8 (loopback");
    Run wide = run("egress", ref, "0.0.0.0/0");
    assertThat(wide.exitCode()).as(wide.err()).isZero();
    assertThat(wide.err()).contains("note: egress rule 0.0.0.0/0 does not open", "127.0.0.0/8");
  }

  @Test
  void createTakesTimersAndLsShowsThem() throws Exception {
    Instant before = Instant.now();
    String ref =
        create(
            "--auto-suspend",
            "10m",
            "--lifetime",
            "2h",
            "--idle-timeout",
            "1h",
            "--delete-after",
            "90m");
    String id = ref.substring("local:".length());
    JsonNode mine = null;
    for (JsonNode node : JSON.readTree(run("ls", "--json").out())) {
      if (node.path("id").asText().equals(id)) {
        mine = node;
      }
    }
    assertThat(mine).isNotNull();
    JsonNode timers = mine.path("timers");
    assertThat(timers.path("autoSuspendSeconds").asLong()).isEqualTo(600);
    assertThat(timers.path("sandboxTimeoutSeconds").asLong()).isEqualTo(7200);
    assertThat(timers.path("idleTimeoutSeconds").asLong()).isEqualTo(3600);
    Instant ends = Instant.parse(mine.path("ends").asText());
    assertThat(ends).isEqualTo(Instant.parse(timers.path("deleteAfter").asText()));
    assertThat(ends).isBetween(before.plusSeconds(5390), Instant.now().plusSeconds(5400));

    Run tooShort = run("create", "--lifetime", "5s");
    assertThat(tooShort.exitCode()).isEqualTo(64);
    assertThat(tooShort.err()).contains("sandboxTimeout must be from 10 seconds to 24 hours");
    Run bad = run("create", "--delete-after", "tomorrow");
    assertThat(bad.exitCode()).isEqualTo(64);
    assertThat(bad.err()).contains("--delete-after: 'tomorrow' is neither a time");
  }

  @Test
  void createWithAWorkdirCreatesItAndExecStartsThereWhenAskedTo() {
    Run create = run("create", "--workdir", "/work/project", "--json");
    assertThat(create.exitCode()).as(create.err()).isZero();
    Matcher m =
        Pattern.compile(
                "\\{\"provider\":\"local\",\"id\":\"([a-z0-9]+)\","
                    + "\"workingDirectory\":\"/work/project\"}\n")
            .matcher(create.out());
    assertThat(m.matches()).as(create.out()).isTrue();
    created.add("local:" + m.group(1));

    Run pwd =
        run("exec", "--workdir", "/work/project", m.group(1), "--", "sh", "-c", "pwd; id -un");
    assertThat(pwd.exitCode()).as(pwd.err()).isZero();
    assertThat(pwd.out()).isEqualTo("/work/project\nsandbox\n");

    Run missing = run("exec", "--workdir", "/no/such/dir", m.group(1), "--", "true");
    assertThat(missing.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(missing.err()).contains("/no/such/dir").contains("does not exist");
  }

  @Test
  void rmThenExecIsUnavailable() {
    String ref = create();

    Run rm = run("rm", ref);
    assertThat(rm.exitCode()).as(rm.err()).isZero();
    assertThat(rm.out()).isEqualTo(ref + "\n");
    created.remove(ref);

    Run exec = run("exec", ref, "--", "true");
    assertThat(exec.exitCode()).isEqualTo(ExitCodes.UNAVAILABLE).isEqualTo(69);
    assertThat(exec.out()).isEmpty();
    assertThat(exec.err().lines().toList())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: ")
        .contains(ref);

    Run again = run("rm", ref.substring("local:".length()));
    assertThat(again.exitCode()).as("rm is idempotent: " + again.err()).isZero();
  }

  @Test
  void cpCopiesBinaryFilesBothWays() throws Exception {
    String ref = create();
    String id = ref.substring("local:".length());
    byte[] bytes = new byte[300_000];
    new Random(42).nextBytes(bytes);
    Path source = Files.write(temp.resolve("blob.bin"), bytes);

    Run in = run("cp", source.toString(), id + ":/home/sandbox/data.bin");
    assertThat(in.exitCode()).as(in.err()).isZero();
    Run sum = run("exec", ref, "--", "sh", "-c", "stat -c '%s %U' data.bin");
    assertThat(sum.out()).isEqualTo(bytes.length + " sandbox\n");

    Path back = temp.resolve("back.bin");
    Run out = run("cp", ref + ":/home/sandbox/data.bin", back.toString());
    assertThat(out.exitCode()).as(out.err()).isZero();
    assertThat(Files.readAllBytes(back)).isEqualTo(bytes);

    Run toDirectory = run("cp", ref + ":data.bin", temp.toString() + "/");
    assertThat(toDirectory.exitCode()).as(toDirectory.err()).isZero();
    assertThat(Files.readAllBytes(temp.resolve("data.bin"))).isEqualTo(bytes);

    Run stdin = run(bytes, "cp", "-", ref + ":piped.bin");
    assertThat(stdin.exitCode()).as(stdin.err()).isZero();
    Run stdout = run("cp", ref + ":piped.bin", "-");
    assertThat(stdout.exitCode()).as(stdout.err()).isZero();
    assertThat(stdout.outBytes()).isEqualTo(bytes);
  }

  @Test
  void cpOfADirectoryOrAMissingFileSaysSo() {
    String ref = create();

    Run dir = run("cp", ref + ":/etc", temp.resolve("etc").toString());
    assertThat(dir.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(dir.err()).contains("is a directory").contains("tar");

    Run hostDir = run("cp", temp.toString(), ref + ":/tmp/x");
    assertThat(hostDir.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(hostDir.err()).contains("is a directory");

    Run missing = run("cp", ref + ":/no/such/file", temp.resolve("x").toString());
    assertThat(missing.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(missing.err()).contains("/no/such/file");
  }

  @Test
  void shellWithoutATerminalSaysToUseExec() {
    String ref = create();

    Run r = run("shell", ref);

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err()).contains("shell needs a terminal; use exec");
  }

  @Test
  void doctorJsonParsesAndItsExitCodeMatchesTheChecks() throws Exception {
    Run r = run("doctor", "--json");

    JsonNode checks = JSON.readTree(r.out());
    assertThat(checks.isArray()).isTrue();
    List<String> names = new ArrayList<>();
    boolean allOk = true;
    for (JsonNode c : checks) {
      names.add(c.path("name").asText());
      assertThat(c.has("ok") && c.has("detail") && c.has("fix")).as(c.toString()).isTrue();
      allOk &= c.path("ok").asBoolean();
    }
    assertThat(names).contains("crun", "hugetlb cgroup", "state directory", "default image");
    assertThat(r.exitCode()).as(r.err()).isEqualTo(allOk ? 0 : ExitCodes.FAILURE);

    Run text = run("doctor");
    assertThat(text.out()).containsPattern("(?m)^ok +crun: ");
  }

  @Test
  void imageLsListsTheDefaultImage() throws Exception {
    Run table = run("image", "ls");
    assertThat(table.exitCode()).as(table.err()).isZero();
    assertThat(table.out())
        .containsPattern("(?m)^NAME +REFERENCE +DIGEST +CREATED +SIZE +DESCRIPTION$");
    assertThat(table.out()).containsPattern("(?m)^default +- +- +\\S+ +\\d+ MiB +Debian bookworm");

    Run json = run("image", "ls", "--json");
    JsonNode images = JSON.readTree(json.out());
    assertThat(images.findValuesAsText("name")).contains("default");

    Run built = run("image", "build", "--json");
    assertThat(built.exitCode()).as(built.err()).isZero();
    assertThat(built.err()).as("--json keeps stderr clean").isEmpty();
    JsonNode image = JSON.readTree(built.out());
    assertThat(image.path("name").asText()).isEqualTo("default");
    assertThat(image.path("sizeBytes").asLong()).isPositive();
    assertThat(image.path("description").asText()).startsWith("Debian bookworm");
    for (JsonNode listed : images) {
      if (listed.path("name").asText().equals("default")) {
        assertThat(image).isEqualTo(listed);
      }
    }

    Run rm = run("image", "rm", "no-such-image");
    assertThat(rm.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(rm.err()).contains("no image 'no-such-image'");
  }

  @Test
  void imageRmOfAnUnknownImageSaysSoAndRemovesNothing() {
    Run rm = run("image", "rm", "no-such-image-x");

    assertThat(rm.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(rm.err()).contains("no image 'no-such-image-x' here");
    assertThat(run("image", "ls").out()).contains("default");
  }

  @Test
  void gcSaysWhatItRemovedOrThatThereWasNothing() throws Exception {
    Run r = run("gc");

    assertThat(r.exitCode()).as(r.err()).isZero();
    assertThat(r.out().lines().toList())
        .allSatisfy(l -> assertThat(l).matches("nothing to clean|removed .+"));

    Run json = run("gc", "--json");
    assertThat(json.exitCode()).as(json.err()).isZero();
    JsonNode removed = JSON.readTree(json.out()).path("removed");
    assertThat(removed.isArray()).as(json.out()).isTrue();
    // The engine's home may be shared with other runs: what is left to remove is theirs to say.
    removed.forEach(
        line ->
            assertThat(line.isTextual() && !line.asText().isBlank()).as(line.toString()).isTrue());
  }

  // ---- lifecycle -----------------------------------------------------------------------------

  private static String stateOf(String ref) throws Exception {
    Run ls = run("ls", "--json");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    for (JsonNode node : JSON.readTree(ls.out())) {
      if ((node.path("provider").asText() + ":" + node.path("id").asText()).equals(ref)) {
        return node.path("state").asText();
      }
    }
    throw new AssertionError(ref + " not in ls --json: " + ls.out());
  }

  @Test
  void suspendResumeStopStartShowTheStateInLsAndExecWakes() throws Exception {
    String ref = create();
    assertThat(run("exec", ref, "--", "sh", "-c", "echo kept > k.txt").exitCode()).isZero();

    Run suspend = run("suspend", ref);
    assertThat(suspend.exitCode()).as(suspend.err()).isZero();
    assertThat(suspend.out()).isEqualTo(ref + "\n");
    assertThat(stateOf(ref)).isEqualTo("suspended");
    Run ls = run("ls");
    assertThat(ls.out()).containsPattern(Pattern.quote(ref) + "\\s+suspended");
    Run resumed = run("resume", "--json", ref);
    assertThat(resumed.exitCode()).as(resumed.err()).isZero();
    assertThat(resumed.err()).isEmpty();
    JsonNode rows = JSON.readTree(resumed.out());
    assertThat(rows.size()).isEqualTo(1);
    assertThat(rows.get(0).path("provider").asText() + ":" + rows.get(0).path("id").asText())
        .isEqualTo(ref);
    assertThat(rows.get(0).path("state").asText()).isEqualTo("running");
    assertThat(rows.get(0).path("image").asText()).isEqualTo("default");
    assertThat(stateOf(ref)).isEqualTo("running");

    assertThat(run("stop", ref).exitCode()).isZero();
    assertThat(stateOf(ref)).isEqualTo("stopped");
    Run cat = run("exec", ref, "--", "cat", "k.txt"); // wakes it
    assertThat(cat.exitCode()).as(cat.err()).isZero();
    assertThat(cat.out()).isEqualTo("kept\n");
    assertThat(stateOf(ref)).isEqualTo("running");
    assertThat(run("stop", ref).exitCode()).isZero();
    assertThat(run("start", ref).exitCode()).isZero();
    assertThat(stateOf(ref)).isEqualTo("running");

    Run gone = run("suspend", "zz0000000000");
    assertThat(gone.exitCode()).isEqualTo(69);
    assertThat(gone.err()).startsWith("sandbox4j: ").contains("unavailable");
  }

  /** Needs checkpoint/restore; where it is unavailable, hibernate must fail saying so. */
  @Test
  void hibernateShowsInLsAndExecRestoresTheProcessesAndForkCopiesThem() throws Exception {
    String ref = create();
    Run bg =
        run(
            "exec",
            ref,
            "--",
            "sh",
            "-c",
            "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.1; done'"
                + " >/dev/null 2>&1 </dev/null & sleep 0.5");
    assertThat(bg.exitCode()).as(bg.err()).isZero();

    Run hibernate = run("hibernate", ref);
    if (hibernate.exitCode() != 0) {
      assertThat(hibernate.err()).contains("checkpoint/restore is unavailable");
      assertThat(stateOf(ref)).isEqualTo("running");
      Prerequisites.require(false, "checkpoint/restore: " + hibernate.err().strip());
      return;
    }
    assertThat(hibernate.out()).isEqualTo(ref + "\n");
    assertThat(hibernate.err())
        .as("known to be long: named at once, as a plain line")
        .isEqualTo("sandbox4j: hibernating " + ref + "\n");
    assertThat(stateOf(ref)).isEqualTo("hibernated");
    assertThat(run("ls").out()).containsPattern(Pattern.quote(ref) + "\\s+hibernated");

    Run fork = run("fork", ref);
    assertThat(fork.exitCode()).as(fork.err()).isZero();
    String forked = fork.out().strip();
    created.add(forked);
    assertThat(fork.err())
        .isEqualTo("sandbox4j: forking " + ref + "\nsandbox4j: processes copied\n");
    assertThat(run("exec", forked, "--", "pgrep", "-f", "while [:]").exitCode()).isZero();

    Run pgrep = run("exec", ref, "--", "pgrep", "-f", "while [:]"); // restores it
    assertThat(pgrep.exitCode()).as("the counter was restored: " + pgrep.err()).isZero();
    assertThat(stateOf(ref)).isEqualTo("running");
  }

  @Test
  void forkSnapshotAndCreateFromSnapshot() throws Exception {
    String ref = create("--cpus", "2");
    assertThat(run("exec", ref, "--", "sh", "-c", "echo original > f.txt").exitCode()).isZero();

    Run fork = run("fork", ref);
    assertThat(fork.exitCode()).as(fork.err()).isZero();
    String forked = fork.out().strip();
    created.add(forked);
    assertThat(forked).matches("local:[a-z0-9]+").isNotEqualTo(ref);
    // Whether processes were copied is said either way, after a plain progress line.
    assertThat(fork.err()).containsAnyOf("processes copied", "processes were not copied: ");
    assertThat(fork.err())
        .as("stderr is no terminal here: plain lines, no \\r, no escapes")
        .startsWith("sandbox4j: forking " + ref + "\n")
        .doesNotContain("\r")
        .doesNotContain("\033");
    Run quiet = run("--quiet", "fork", "--files-only", ref);
    assertThat(quiet.exitCode()).as(quiet.err()).isZero();
    created.add(quiet.out().strip());
    assertThat(quiet.err())
        .as("--quiet: no progress; the result's line stays")
        .isEqualTo(
            "sandbox4j: processes were not copied: only the files were asked for (forkFiles)\n");
    assertThat(run("exec", forked, "--", "cat", "f.txt").out()).isEqualTo("original\n");
    Run forkJson = run("fork", "--json", ref);
    assertThat(forkJson.err()).as("--json: nothing on stderr, progress neither").isEmpty();
    JsonNode node = JSON.readTree(forkJson.out());
    created.add("local:" + node.path("id").asText());
    assertThat(node.has("processesCopied")).isTrue();
    assertThat(node.path("notCarried").isArray()).isTrue();
    assertThat(node.path("processesCopied").asBoolean())
        .isEqualTo(fork.err().contains("processes copied"));
    assertThat(node.path("reason").asText().isEmpty())
        .isEqualTo(node.path("processesCopied").asBoolean());

    Run filesOnly = run("fork", "--files-only", ref);
    assertThat(filesOnly.exitCode()).as(filesOnly.err()).isZero();
    created.add(filesOnly.out().strip());
    assertThat(filesOnly.err())
        .contains("processes were not copied: only the files were asked for (forkFiles)");
    assertThat(run("exec", filesOnly.out().strip(), "--", "cat", "f.txt").out())
        .isEqualTo("original\n");

    // Stopped: no processes to copy, and it says so.
    assertThat(run("stop", ref).exitCode()).isZero();
    Run fromStopped = run("fork", ref);
    assertThat(fromStopped.exitCode()).as(fromStopped.err()).isZero();
    created.add(fromStopped.out().strip());
    assertThat(fromStopped.err())
        .contains("processes were not copied: ")
        .contains("no running processes");

    String name = "cli-test-" + Long.toString(new Random().nextLong() & Long.MAX_VALUE, 36);
    try {
      Run save = run("snapshot", ref, name);
      assertThat(save.exitCode()).as(save.err()).isZero();
      assertThat(save.out()).isEqualTo(name + "\n");
      assertThat(save.err()).isEqualTo("sandbox4j: saving snapshot " + name + " of " + ref + "\n");
      Run saveJson = run("snapshot", ref, name, "--json");
      assertThat(saveJson.exitCode()).as(saveJson.err()).isZero();
      assertThat(saveJson.err()).isEmpty();
      JsonNode snapshot = JSON.readTree(saveJson.out());
      assertThat(snapshot.path("name").asText()).isEqualTo(name);
      assertThat(snapshot.path("source").asText()).isEqualTo(ref);
      assertThat(snapshot.path("image").asText()).isEqualTo("default");
      assertThat(snapshot.path("cpus").asInt()).isEqualTo(2);
      assertThat(snapshot.path("memoryBytes").asLong()).isPositive();
      assertThat(snapshot.path("sizeBytes").asLong()).isNotNegative();
      assertThat(snapshot.path("created").asText()).matches("\\d{4}-.+Z");
      Run list = run("snapshot", "ls", "--json");
      assertThat(list.out()).contains("\"" + name + "\"");
      assertThat(run("snapshot", "ls").out()).contains(name);

      Run refused = run("create", "--snapshot", name, "--cpus", "4");
      assertThat(refused.exitCode()).isEqualTo(64);
      assertThat(refused.err()).contains("--snapshot cannot be combined with --cpus");

      String restored = create("--snapshot", name);
      assertThat(run("exec", restored, "--", "cat", "f.txt").out()).isEqualTo("original\n");
      Run lsJson = run("ls", "--json");
      for (JsonNode n : JSON.readTree(lsJson.out())) {
        if (("local:" + n.path("id").asText()).equals(restored)) {
          assertThat(n.path("cpus").asInt()).isEqualTo(2);
          assertThat(n.path("image").asText()).isEqualTo(name);
        }
      }
    } finally {
      Run rm = run("snapshot", "rm", name);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
    assertThat(run("snapshot", "ls").out()).doesNotContain(name);
    Run rmJson = run("snapshot", "rm", "--json", name);
    assertThat(rmJson.exitCode()).as("removing none is no error: " + rmJson.err()).isZero();
    assertThat(rmJson.out()).isEqualTo("[\"" + name + "\"]\n");
    Run missing = run("create", "--snapshot", name);
    assertThat(missing.exitCode()).isEqualTo(69);
    assertThat(missing.err()).contains("does not exist");
  }
}
