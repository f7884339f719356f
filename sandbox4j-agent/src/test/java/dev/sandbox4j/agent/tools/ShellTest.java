package dev.sandbox4j.agent.tools;

import static dev.sandbox4j.agent.tools.ToolFixture.json;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Shell's tools on a host workspace: their output formats and error messages. */
class ShellTest {

  @TempDir Path root;
  HostWorkspaceProvider provider;
  ToolFixture tools;
  Shell shell = Shell.create();

  @BeforeEach
  void setUp() {
    provider = HostWorkspaceProvider.create(root);
    tools = new ToolFixture(provider.newBackend());
  }

  private String run(String command) throws Exception {
    return tools.call(shell, "run_command", "{\"command\": " + json(command) + "}");
  }

  @Test
  void runCommandLabelsStdoutAndStderrAndOmitsAZeroExitCode() throws Exception {
    assertThat(run("echo out; echo err >&2")).isEqualTo("[stdout]\nout\n[stderr]\nerr");
    assertThat(run("echo only")).isEqualTo("[stdout]\nonly");
  }

  @Test
  void runCommandShowsANonZeroExitCodeLast() throws Exception {
    assertThat(run("echo failing >&2; exit 3")).isEqualTo("[stderr]\nfailing\n[exit code: 3]");
    assertThat(run("exit 1")).isEqualTo("(no output)\n[exit code: 1]");
    assertThat(run("true")).isEqualTo("(no output)");
    assertThat(run("no-such-program-xyz")).endsWith("[exit code: 127]").contains("[stderr]");
  }

  @Test
  void runCommandRunsInTheWorkingDirectoryWithEmptyStdin() throws Exception {
    assertThat(run("pwd")).isEqualTo("[stdout]\n" + tools.workspace.workingDirectory());
    assertThat(run("cat; echo done")).isEqualTo("[stdout]\ndone");
  }

  @Test
  void longOutputKeepsTheTailAndSaysHowMuchWasCut() throws Exception {
    Shell small = Shell.builder().maxOutputChars(300).build();
    String out =
        tools.call(small, "run_command", "{\"command\": \"seq 1 2000; echo boom >&2; exit 2\"}");
    assertThat(out.length()).isLessThanOrEqualTo(300);
    assertThat(out).startsWith("[... output truncated: the first ");
    assertThat(out).endsWith("1999\n2000\n[stderr]\nboom\n[exit code: 2]");
    Matcher m =
        Pattern.compile("first (\\d+) chars were cut, showing the last (\\d+) chars").matcher(out);
    assertThat(m.find()).isTrue();
    String body = "[stdout]\n" + String.join("\n", seq(2000)) + "\n[stderr]\nboom";
    assertThat(Integer.parseInt(m.group(1)) + Integer.parseInt(m.group(2)))
        .isEqualTo(body.length());
  }

  private static List<String> seq(int n) {
    return java.util.stream.IntStream.rangeClosed(1, n).mapToObj(Integer::toString).toList();
  }

  @Test
  void aTimeoutReportsThePartialOutputAndTheDeadline() throws Exception {
    String out =
        tools.call(
            shell,
            "run_command",
            "{\"command\": \"echo started; sleep 30\", \"timeout_seconds\": 0.5}");
    assertThat(out).isEqualTo("[stdout]\nstarted\n[Command timed out after 0.5s]");
  }

  @Test
  void theDefaultTimeoutIsConfigurable() throws Exception {
    Shell quick = Shell.builder().defaultTimeout(Duration.ofMillis(300)).build();
    assertThat(tools.call(quick, "run_command", "{\"command\": \"sleep 30\"}"))
        .isEqualTo("(no output)\n[Command timed out after 0.3s]");
    assertThat(ToolFixture.tool(quick, "run_command").definition().description())
        .contains("default 0.3s");
  }

  @Test
  void outputOverTheWorkspaceLimitIsReportedWithTheStartKept() throws Exception {
    String out = run("head -c 11000000 /dev/zero | tr '\\000' a");
    assertThat(out).startsWith("[... output truncated: the first ").contains("\naaaaaaaa");
    assertThat(out)
        .endsWith(
            "KiB each (cut to the end of that when long). Send the output to a file and read"
                + " parts of it, e.g. `<command> > out.log 2>&1; tail -n 100 out.log`.]")
        .contains("[Command killed: its output passed 10485760 bytes");
    assertThat(out.length()).isLessThanOrEqualTo(50_000);
  }

  @Test
  void liveOutputGoesToTheRunsListener() throws Exception {
    run("echo one; echo two >&2");
    assertThat(String.join("", tools.emitted)).contains("stdout:one\n").contains("stderr:two\n");
  }

  @Test
  void aDeniedCommandIsNotRun() throws Exception {
    Files.writeString(Path.of(tools.workspace.workingDirectory(), "keep.txt"), "x");
    Shell guarded = Shell.builder().deniedCommands(List.of("rm", "git push")).build();
    String error =
        tools.error(guarded, "run_command", "{\"command\": \"ls && FOO=1 /bin/rm keep.txt\"}");
    assertThat(error)
        .isEqualTo("Command 'rm' is denied; it was not run. Denied commands: rm, git push.");
    assertThat(Path.of(tools.workspace.workingDirectory(), "keep.txt")).exists();
    assertThat(tools.error(guarded, "run_command", "{\"command\": \"git push origin\"}"))
        .startsWith("Command 'git push' is denied");
    assertThat(tools.call(guarded, "run_command", "{\"command\": \"echo git push\"}"))
        .isEqualTo("[stdout]\ngit push");
  }

  @Test
  void anAllowlistRefusesEverythingElse() throws Exception {
    Shell guarded = Shell.builder().allowedCommands(List.of("echo", "ls")).build();
    assertThat(tools.call(guarded, "run_command", "{\"command\": \"echo hi | ls\"}"))
        .isEqualTo("(no output)");
    assertThat(tools.error(guarded, "run_command", "{\"command\": \"echo hi | cat\"}"))
        .isEqualTo(
            "Command 'cat' is not in the allowed list; it was not run. Allowed commands: echo,"
                + " ls.");
    assertThatThrownBy(
            () ->
                Shell.builder()
                    .allowedCommands(List.of("ls"))
                    .deniedCommands(List.of("rm"))
                    .build())
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void anEmptyCommandIsAnError() {
    assertThat(tools.error(shell, "run_command", "{\"command\": \"  \"}"))
        .isEqualTo("The command is empty: give a shell command to run.");
  }

  @Test
  void backgroundCommandsStartReportNewOutputAndStop() throws Exception {
    String started =
        tools.call(
            shell,
            "start_command",
            "{\"command\": \"echo first; while :; do sleep 0.05; [ -f go ] && break; done;"
                + " echo second; sleep 30\"}");
    assertThat(started).startsWith("Started background command: 'echo first;");
    String id = id(started);

    String check = awaitOutput(id, "first");
    assertThat(check).isEqualTo("[stdout]\nfirst\n[status: running]");
    assertThat(tools.call(shell, "check_command", idArgs(id)))
        .isEqualTo("(no output yet)\n[status: running]");

    Files.writeString(Path.of(tools.workspace.workingDirectory(), "go"), "");
    assertThat(awaitOutput(id, "second")).isEqualTo("[stdout]\nsecond\n[status: running]");

    String stopped = tools.call(shell, "stop_command", idArgs(id));
    // SIGTERM ends it; the exit code is the shell's (143) or, where setsid waits, setsid's report
    assertThat(stopped).containsPattern("\\[stopped]\n\\[exit code: \\d+]$");
    assertThat(stopped).doesNotContain("first", "second");
    assertThat(tools.call(shell, "check_command", idArgs(id)))
        .isEqualTo(
            "[Error: unknown command ID '"
                + id
                + "'] No background command of this run is known (a stopped one is forgotten).");
  }

  @Test
  void aFinishedBackgroundCommandReportsItsExitCode() throws Exception {
    String id = id(tools.call(shell, "start_command", "{\"command\": \"echo done; exit 4\"}"));
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    String check;
    do {
      Thread.sleep(50);
      check = tools.call(shell, "check_command", idArgs(id));
    } while (check.contains("running") && System.nanoTime() < deadline);
    assertThat(check)
        .isIn(
            "[stdout]\ndone\n[status: finished]\n[exit code: 4]",
            "(no output yet)\n[status: finished]\n[exit code: 4]");
  }

  @Test
  void theShellToolReturnsAFinishedCommandsOutput() throws Exception {
    Shell coderShell = Shell.builder().tools("shell", "check_command", "stop_command").build();
    assertThat(tools.call(coderShell, "shell", "{\"command\": \"echo hi; exit 5\"}"))
        .isEqualTo("[stdout]\nhi\n[exit code: 5]");
  }

  @Test
  void theShellToolLeavesASlowCommandRunningAndReturnsItsId() throws Exception {
    Shell coderShell = Shell.builder().tools("shell", "check_command", "stop_command").build();
    String out =
        tools.call(
            coderShell,
            "shell",
            "{\"command\": \"echo begun; sleep 30\", \"timeout_seconds\": 0.5}");
    assertThat(out).startsWith("[stdout]\nbegun\n[status: running after 0.5s]\nID: ");
    String id = id(out);
    assertThat(out)
        .endsWith(
            "call check_command(command_id=\""
                + id
                + "\") for its new output"
                + " and status, or stop_command(command_id=\""
                + id
                + "\") to stop it.");
    assertThat(tools.call(coderShell, "check_command", idArgs(id)))
        .isEqualTo("(no output yet)\n[status: running]");
    assertThat(tools.call(coderShell, "stop_command", idArgs(id)))
        .containsPattern("\\[stopped]\n\\[exit code: \\d+]$");
  }

  @Test
  void theShellToolStartsInTheBackgroundOnRequest() throws Exception {
    Shell coderShell = Shell.builder().tools("shell", "check_command", "stop_command").build();
    String out =
        tools.call(coderShell, "shell", "{\"command\": \"sleep 30\", \"background\": true}");
    assertThat(out).matches("Started background command: 'sleep 30'\nID: [0-9a-z]+");
    tools.call(coderShell, "stop_command", idArgs(id(out)));
    assertThat(tools.error(coderShell, "shell", "{\"command\": \"ls\", \"timeout_seconds\": 300}"))
        .isEqualTo("timeout_seconds must be at most 270 seconds, was 300.");
  }

  @Test
  void backgroundCommandsAreStoppedWhenTheRunEnds() throws Exception {
    Path marker = root.resolve("marker");
    Agent agent =
        Agent.builder()
            .model(
                FunctionModel.of(
                    request ->
                        request.messages().size() == 1
                            ? ResponseMessage.toolCall(
                                "1",
                                "start_command",
                                "{\"command\": \"sleep 30; touch " + marker + "\"}")
                            : ResponseMessage.text("started")))
            .capability(WorkspaceCapability.of(provider))
            .capability(Shell.builder().stopGrace(Duration.ofMillis(100)).build())
            .build();
    RunResult result = agent.runSync("start it");
    RequestPart.ToolReturn ret =
        (RequestPart.ToolReturn) ((RequestMessage) result.allMessages().get(2)).parts().getFirst();
    assertThat(ret.content()).startsWith("Started background command:");
    String pids =
        tools.call(shell, "run_command", "{\"command\": \"pgrep -f 'sleep 3[0]; touch' || true\"}");
    assertThat(pids).isEqualTo("(no output)");
  }

  @Test
  void theToolsHaveTheReferenceNamesAndArguments() {
    assertThat(shell.tools().stream().map(t -> t.definition().name()))
        .containsExactly("run_command", "start_command", "check_command", "stop_command");
    assertThat(ToolFixture.tool(shell, "run_command").definition().parametersSchema().toString())
        .contains("command", "timeout_seconds");
    assertThat(ToolFixture.tool(shell, "check_command").definition().parametersSchema().toString())
        .contains("command_id");
  }

  private String awaitOutput(String id, String text) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (true) {
      String check = tools.call(shell, "check_command", idArgs(id));
      if (check.contains(text) || System.nanoTime() > deadline) {
        return check;
      }
      Thread.sleep(50);
    }
  }

  private static String idArgs(String id) {
    return "{\"command_id\": " + json(id) + "}";
  }

  private static String id(String output) {
    Matcher m = Pattern.compile("ID: ([0-9a-z]+)").matcher(output);
    assertThat(m.find()).as("an ID in %s", output).isTrue();
    return m.group(1);
  }
}
