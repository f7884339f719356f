package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Runs the whole command line in-process against host workspaces under a temporary home; the local
 * engine's commands are in {@link LocalCliTest}.
 */
class CliTest {

  private static final Pattern CREATED = Pattern.compile("Created host workspace (host:[a-z0-9]+)");

  @TempDir Path home;

  record Run(int exitCode, String out, String err) {
    List<String> errLines() {
      return err.lines().toList();
    }
  }

  private Run run(String... args) {
    return runWithStdin(new ByteArrayInputStream(new byte[0]), args);
  }

  private Run runWithStdin(InputStream stdin, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(home, stdin, o, e), args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  /** The refs {@code ls --json} lists. */
  private List<String> refs() {
    Run ls = run("ls", "--json");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    return java.util.regex.Pattern.compile("\\{\"provider\":\"([a-z]+)\",\"id\":\"([a-z0-9]+)\"")
        .matcher(ls.out())
        .results()
        .map(r -> r.group(1) + ":" + r.group(2))
        .toList();
  }

  private String create() {
    Run created = run("--quiet", "create", "--provider", "host");
    assertThat(created.exitCode()).as(created.err()).isZero();
    return created.out().strip();
  }

  @Test
  void completionPrintsABashScriptThatKnowsTheCommandsAndTheirOptions() {
    Run r = run("completion");

    assertThat(r.exitCode()).as(r.err()).isZero();
    assertThat(r.out())
        .contains("complete -F _complete_sandbox4j")
        .contains("snapshot")
        .contains("--provider")
        .contains("completion");
  }

  @Test
  void execNewCreatesAWorkspaceStreamsOutputAndExitsWithTheCommandsCode() {
    Run r =
        run(
            "exec",
            "--provider",
            "host",
            "new",
            "--",
            "sh",
            "-c",
            "echo hi; echo oops >&2; exit 3");

    assertThat(r.exitCode()).isEqualTo(3);
    assertThat(r.out()).isEqualTo("hi\n");
    assertThat(r.err()).contains("oops\n");
    assertThat(r.err())
        .contains("sandbox4j: warning: host workspaces are not isolated")
        .containsOnlyOnce("warning");
    Matcher m = CREATED.matcher(r.err());
    assertThat(m.find()).as(r.err()).isTrue();
    String id = m.group(1).substring("host:".length());
    assertThat(home.resolve("host").resolve(id)).isDirectory();
    assertThat(refs()).containsExactly(m.group(1));
  }

  @Test
  void execRunsInTheWorkspaceDirectory() throws Exception {
    String ref = create();
    Run r = run("--quiet", "exec", ref, "--", "pwd");

    assertThat(r.exitCode()).as(r.err()).isZero();
    Path expected = home.resolve("host").resolve(ref.substring("host:".length())).toRealPath();
    assertThat(r.out()).isEqualTo(expected + "\n");
  }

  @Test
  void execWithARefSeesFilesAnEarlierExecWrote() {
    String ref = create();
    assertThat(ref).matches("host:[a-z0-9]+");

    Run write = run("exec", "--quiet", ref, "--", "sh", "-c", "echo kept > notes.txt");
    assertThat(write.exitCode()).as(write.err()).isZero();
    Run read = run("exec", "--quiet", ref, "--", "cat", "notes.txt");

    assertThat(read.exitCode()).as(read.err()).isZero();
    assertThat(read.out()).isEqualTo("kept\n");
    assertThat(read.err()).isEmpty();
  }

  @Test
  void argvIsNotInterpretedByAShellButShellStringsAre() {
    String ref = create();

    Run argv = run("--quiet", "exec", ref, "--", "echo", "$HOME", "a  b");
    assertThat(argv.out()).isEqualTo("$HOME a  b\n");

    Run shell = run("--quiet", "exec", "--shell", ref, "--", "echo $((40 + 2)); exit 7");
    assertThat(shell.exitCode()).isEqualTo(7);
    assertThat(shell.out()).isEqualTo("42\n");
  }

  @Test
  void shellTakesExactlyOneScript() {
    Run r = run("--quiet", "exec", "--shell", "new", "--", "echo", "a");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.errLines())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: --shell takes one script string, got 2 arguments");
    assertThat(home.resolve("host")).doesNotExist();
  }

  @Test
  void envAndStdinReachTheCommand() {
    String ref = create();

    Run env =
        run("--quiet", "exec", "-e", "GREETING=hello there", ref, "--", "printenv", "GREETING");
    assertThat(env.out()).isEqualTo("hello there\n");

    Run stdin =
        runWithStdin(
            new ByteArrayInputStream("piped\n".getBytes(StandardCharsets.UTF_8)),
            "--quiet",
            "exec",
            "--stdin",
            ref,
            "--",
            "cat");
    assertThat(stdin.out()).isEqualTo("piped\n");

    Run noStdin =
        runWithStdin(
            new ByteArrayInputStream("not read\n".getBytes(StandardCharsets.UTF_8)),
            "--quiet",
            "exec",
            ref,
            "--",
            "cat");
    assertThat(noStdin.exitCode()).isZero();
    assertThat(noStdin.out()).isEmpty();
  }

  @Test
  void rmThenExecReportsTheWorkspaceUnavailable() {
    String ref = create();
    Path dir = home.resolve("host").resolve(ref.substring("host:".length()));
    assertThat(dir).isDirectory();

    Run rm = run("rm", ref);
    assertThat(rm.exitCode()).as(rm.err()).isZero();
    assertThat(rm.out()).isEqualTo(ref + "\n");
    assertThat(dir).doesNotExist();

    Run exec = run("--quiet", "exec", ref, "--", "true");
    assertThat(exec.exitCode()).isEqualTo(ExitCodes.UNAVAILABLE);
    assertThat(exec.out()).isEmpty();
    assertThat(exec.errLines()).singleElement().asString().startsWith("sandbox4j: ").contains(ref);
    assertThat(dir).as("gone is gone: no empty replacement").doesNotExist();

    Run again = run("rm", ref);
    assertThat(again.exitCode()).as("rm is idempotent: " + again.err()).isZero();
    assertThat(again.out()).isEqualTo(ref + "\n");
  }

  @Test
  void rmJsonListsWhatItDestroyed() {
    String first = create();
    String second = create();

    Run rm = run("rm", "--json", first, second);

    assertThat(rm.exitCode()).as(rm.err()).isZero();
    assertThat(rm.out())
        .isEqualTo(
            "[{\"provider\":\"host\",\"id\":\""
                + first.substring("host:".length())
                + "\"},{\"provider\":\"host\",\"id\":\""
                + second.substring("host:".length())
                + "\"}]\n");
    assertThat(refs()).isEmpty();
  }

  @Test
  void rmChecksEveryRefBeforeDestroyingAny() {
    String ref = create();

    Run r = run("rm", ref, "host:..");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.out()).isEmpty();
    assertThat(r.errLines()).singleElement().asString().startsWith("sandbox4j: ").contains("..");
    assertThat(refs()).containsExactly(ref);
  }

  @Test
  void aMalformedRefIsAUsageErrorOnOneLine() {
    Run r = run("exec", "not-a-ref", "--", "true");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.out()).isEmpty();
    assertThat(r.errLines())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: malformed workspace ref 'not-a-ref'")
        .contains("provider:id")
        .endsWith("(see 'sandbox4j exec --help')");
    assertThat(home.resolve("host")).doesNotExist();
  }

  @Test
  void runWithAnUnknownModelProviderIsAUsageError() {
    Run r = run("run", "--model", "acme:big-1", "--provider", "host", "task");
    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err())
        .startsWith(
            "sandbox4j: unknown model provider 'acme' in 'acme:big-1': the providers are anthropic"
                + " and openai");
  }

  @Test
  void runWithABrokenHistoryFileSaysWhatIsWrongAndLeavesItAlone() throws Exception {
    Path history = Files.writeString(home.resolve("broken.json"), "[{\"kind\":\"teleport\"}]");
    Run r =
        run("run", "--model", "test", "--provider", "host", "--history", history.toString(), "x");
    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.err()).startsWith("sandbox4j: " + history + ": not a message history: ");
    assertThat(Files.readString(history)).isEqualTo("[{\"kind\":\"teleport\"}]");
  }

  @Test
  void anUnknownProviderIsAUsageErrorNamingTheKnownOnes() {
    Run byRef = run("exec", "nosuch:abc", "--", "true");
    assertThat(byRef.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(byRef.errLines())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: unknown workspace provider 'nosuch'")
        .contains("known: local, docker, modal, boxd, k8s, host");

    Run byOption = run("create", "--provider", "nope");
    assertThat(byOption.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(byOption.errLines())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: unknown workspace provider 'nope'");
  }

  @Test
  void optionsOfTheCommandMustComeAfterDoubleDash() {
    Run r = run("exec", "new", "ls", "-la");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.errLines())
        .singleElement()
        .asString()
        .contains("'-la'")
        .contains("put the command after '--'");
  }

  @Test
  void aTimeoutKillsTheCommandAndExits124() {
    Run r =
        run(
            "exec",
            "--quiet",
            "--timeout",
            "500ms",
            "--provider",
            "host",
            "new",
            "--",
            "sh",
            "-c",
            "echo started; sleep 60");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.TIMEOUT).isEqualTo(124);
    assertThat(r.out()).isEqualTo("started\n");
    assertThat(r.errLines()).last().isEqualTo("sandbox4j: command timed out after 500ms");
    assertThat(r.err()).doesNotContain("\tat ");
  }

  @Test
  void aBadTimeoutIsAUsageError() {
    Run r = run("exec", "--timeout", "soon", "new", "--", "true");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.errLines())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: ")
        .contains("invalid duration 'soon'");
  }

  @Test
  void outputPastTheLimitKillsTheCommandAndExits125() {
    Run r =
        run(
            "exec",
            "--quiet",
            "--output-limit",
            "1K",
            "--provider",
            "host",
            "new",
            "--",
            "sh",
            "-c",
            "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.OUTPUT_LIMIT);
    assertThat(r.errLines())
        .last()
        .asString()
        .startsWith("sandbox4j: command output passed the limit of 1024 bytes");
  }

  @Test
  void debugAddsTheStackTrace() {
    String ref = create();
    run("rm", ref);

    assertThat(run("--quiet", "exec", ref, "--", "true").err()).doesNotContain("\tat ");
    Run debug = run("--quiet", "exec", "--debug", ref, "--", "true");
    assertThat(debug.exitCode()).isEqualTo(ExitCodes.UNAVAILABLE);
    assertThat(debug.err()).contains("WorkspaceUnavailableException").contains("\tat ");
  }

  @Test
  void quietDropsTheHostWarningOnly() {
    Run loud = run("exec", "--provider", "host", "new", "--", "true");
    assertThat(loud.err()).contains("warning");

    Run quiet = run("exec", "--quiet", "--provider", "host", "new", "--", "true");
    assertThat(quiet.exitCode()).isZero();
    assertThat(quiet.errLines()).singleElement().asString().matches(CREATED.pattern());
  }

  @Test
  void createPrintsTheRefOrJson() throws Exception {
    Run plain = run("create", "--provider", "host");
    assertThat(plain.exitCode()).isZero();
    assertThat(plain.out()).matches("host:[a-z0-9]+\n");
    assertThat(plain.errLines()).singleElement().asString().contains("not isolated");

    Run json = run("--quiet", "create", "--provider", "host", "--json");
    assertThat(json.exitCode()).isZero();
    Matcher m =
        Pattern.compile(
                "\\{\"provider\":\"host\",\"id\":\"([a-z0-9]+)\",\"workingDirectory\":\"([^\"]+)\"}\n")
            .matcher(json.out());
    assertThat(m.matches()).as(json.out()).isTrue();
    assertThat(Path.of(m.group(2)))
        .isDirectory()
        .isEqualTo(home.resolve("host").resolve(m.group(1)).toRealPath());
  }

  @Test
  void createRefusesEnvThatNeitherProviderWouldKeep() {
    for (String provider : List.of("host", "local")) {
      Run r = run("create", "--provider", provider, "--env", "A=b");

      assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
      assertThat(r.errLines())
          .singleElement()
          .asString()
          .contains(provider + " workspaces do not keep an environment")
          .contains("pass --env to each");
    }
    assertThat(run("ls").out()).isEmpty();
  }

  @Test
  void localOnlyOptionsAreRefusedForHostWorkspaces() {
    Run r = run("create", "--provider", "host", "--image", "default", "--label", "a=b");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.errLines())
        .singleElement()
        .asString()
        .contains("--image, --label are for local sandboxes only");

    Run exec = run("exec", "--provider", "host", "--workdir", "/tmp", "new", "--", "true");
    assertThat(exec.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(exec.errLines()).singleElement().asString().contains("--workdir is for local");
    assertThat(home.resolve("host")).doesNotExist();
  }

  @Test
  void anUnknownIsolationIsAUsageErrorNamingTheAcceptedOnes() {
    for (String command : List.of("create", "exec", "run", "mcp", "demo")) {
      Run r =
          command.equals("exec")
              ? run("exec", "--isolation", "vm", "new", "--", "true")
              : command.equals("run")
                  ? run("run", "--isolation", "vm", "task")
                  : run(command, "--isolation", "vm");

      assertThat(r.exitCode()).as(command).isEqualTo(ExitCodes.USAGE);
      assertThat(r.errLines())
          .as(command)
          .singleElement()
          .asString()
          .contains("invalid value for option '--isolation'")
          .contains("unknown isolation 'vm': expected one of container, gvisor");
    }
    assertThat(run("create", "--help").out()).contains("--isolation=container|gvisor");
  }

  @Test
  void isolationIsRefusedWhereTheProviderCannotGiveIt() {
    Run host = run("create", "--provider", "host", "--isolation", "container");
    assertThat(host.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(host.errLines())
        .singleElement()
        .asString()
        .contains("--isolation is for local sandboxes only, not host workspaces");

    // refused by name before any daemon is asked: the same with or without Docker here
    Run docker = run("create", "--provider", "docker", "--isolation", "gvisor");
    assertThat(docker.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(docker.errLines())
        .singleElement()
        .asString()
        .contains("--isolation gvisor is not supported by docker sandboxes")
        .contains("use --provider local");
    Run dockerExec =
        run("exec", "--provider", "docker", "--isolation", "gvisor", "new", "--", "true");
    assertThat(dockerExec.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(dockerExec.err()).contains("--isolation gvisor is not supported by docker");
    assertThat(home.resolve("host")).doesNotExist();
  }

  @Test
  void isolationIsForANewWorkspaceOnly() {
    String ref = create();

    Run exec = run("exec", ref, "--isolation", "gvisor", "--", "true");

    assertThat(exec.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(exec.errLines())
        .singleElement()
        .asString()
        .contains("--isolation is for a new sandbox; " + ref + " keeps the isolation");
  }

  @Test
  void aBareIdMeansALocalSandboxAndAMalformedOneIsAUsageError() {
    Run bad = run("rm", "Not_An_Id");
    assertThat(bad.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(bad.errLines())
        .singleElement()
        .asString()
        .contains("malformed workspace ref 'Not_An_Id'")
        .contains("bare local sandbox id");

    Run shellOfHost = run("shell", "host:abc");
    assertThat(shellOfHost.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(shellOfHost.errLines()).singleElement().asString().contains("use exec");
  }

  @Test
  void cpNeedsExactlyOneSideInASandbox() {
    Run neither = run("cp", "a.txt", "/tmp/b.txt");
    assertThat(neither.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(neither.errLines()).singleElement().asString().contains("neither SRC nor DST");

    Run both = run("cp", "abc:/x", "local:def:/y");
    assertThat(both.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(both.errLines()).singleElement().asString().contains("both SRC and DST");

    Run noPath = run("cp", "local:abc", "/tmp/x");
    assertThat(noPath.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(noPath.errLines()).singleElement().asString().contains("local:abc:/path");
  }

  @Test
  void cpCopiesToAndFromAHostWorkspace() throws Exception {
    String ref = create();
    byte[] bytes = new byte[70_000];
    new java.util.Random(7).nextBytes(bytes);
    Path source = Files.write(home.resolve("in.bin"), bytes);

    Run in = run("--quiet", "cp", source.toString(), ref + ":data/in.bin");
    assertThat(in.exitCode()).as(in.err()).isZero();
    Path back = home.resolve("back.bin");
    Run out = run("--quiet", "cp", ref + ":data/in.bin", back.toString());
    assertThat(out.exitCode()).as(out.err()).isZero();

    assertThat(Files.readAllBytes(back)).isEqualTo(bytes);
  }

  @Test
  void lsListsEveryWorkspaceSortedAndAsJson() {
    assertThat(run("ls").out()).isEmpty();
    assertThat(run("ls", "--json").out()).isEqualTo("[]\n");

    List<String> refs = List.of(create(), create(), create()).stream().sorted().toList();

    Run plain = run("ls");
    assertThat(plain.exitCode()).isZero();
    List<String> lines = plain.out().lines().toList();
    assertThat(lines.getFirst())
        .matches("REF +STATE +IMAGE +ISOLATION +CREATED +ENDS +LABELS +EGRESS +NETWORKS +URL");
    assertThat(lines.subList(1, lines.size()))
        .hasSize(3)
        .allSatisfy(l -> assertThat(l).matches("host:[a-z0-9]+ +- +- +- +- +- +- +- +- +-"));
    assertThat(lines.subList(1, lines.size()).stream().map(l -> l.split(" ")[0]).toList())
        .isEqualTo(refs);

    Run json = run("ls", "--provider", "host", "--json");
    String expected =
        refs.stream()
            .map(r -> "{\"provider\":\"host\",\"id\":\"" + r.substring(5) + "\"}")
            .reduce((a, b) -> a + "," + b)
            .orElseThrow();
    assertThat(json.out()).isEqualTo("[" + expected + "]\n");
  }

  @Test
  void versionAndHelp() {
    Run version = run("--version");
    assertThat(version.exitCode()).isZero();
    assertThat(version.out()).matches("sandbox4j \\d+\\.\\d+\\.\\d+\\S*\n");

    Run help = run("exec", "--help");
    assertThat(help.exitCode()).isZero();
    assertThat(help.out())
        .contains("sandbox4j exec [OPTIONS] ID -- CMD...")
        .contains("Exit codes:")
        .contains("124")
        .contains("69");

    for (String[] command :
        List.of(
            new String[] {"fork"},
            new String[] {"keys", "ls"},
            new String[] {"image", "build"},
            new String[] {"egress"})) {
      List<String> args = new java.util.ArrayList<>(List.of(command));
      args.add("--help");
      Run other = run(args.toArray(String[]::new));
      assertThat(other.exitCode()).isZero();
      assertThat(other.out())
          .as("every command lists its exit codes, without exec's own")
          .contains("Exit codes:", "  64", "  69", "  70", "  130")
          .doesNotContain("  124", "  125");
    }
    assertThat(run("--help").out()).contains("Exit codes:", "  124", "  125", "  other");
  }

  @Test
  void aProviderFailureIsReportedOnOneLineWithItsOwnCode() throws Exception {
    Files.writeString(home.resolve("host"), "a file where the workspace root should be");

    Run r = run("--quiet", "create", "--provider", "host");

    assertThat(r.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(r.out()).isEmpty();
    assertThat(r.errLines())
        .singleElement()
        .asString()
        .startsWith("sandbox4j: cannot create a host workspace under " + home.resolve("host"));
  }

  @Test
  void noCommandIsAUsageError() {
    Run r = run();

    assertThat(r.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(r.errLines()).singleElement().asString().startsWith("sandbox4j: missing a command");
  }

  @Test
  void theHomeComesFromSandbox4jHomeOrTheUsersHome() throws Exception {
    assertThat(Main.home(java.util.Map.of("SANDBOX4J_HOME", home.toString()), "/nowhere", true))
        .isEqualTo(home);
    assertThat(Main.home(java.util.Map.of(), "/home/someone", false))
        .isEqualTo(Path.of("/home/someone/.sandbox4j"));
    assertThat(Main.home(java.util.Map.of(), "/root", true))
        .isEqualTo(Path.of("/var/lib/sandbox4j"));
    assertThat(Files.exists(home.resolve("host"))).isFalse();
  }
}
