package dev.sandbox4j.agent.tools;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.agent.LocalEngine;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceBackend;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The tools end to end in a real local sandbox (default image: has rg). Needs root and crun. */
class LocalSandboxToolsTest {

  private static LocalSandbox sandboxes;
  private static WorkspaceBackend backend;
  private static ToolFixture tools;

  @BeforeAll
  static void createSandbox() {
    LocalEngine.require();
    sandboxes = new LocalSandbox();
    backend = sandboxes.newBackend();
    tools = new ToolFixture(backend);
    tools.workspace.open();
  }

  @AfterAll
  static void destroySandbox() {
    if (backend != null) {
      backend.ref().ifPresent(sandboxes::destroy);
    }
  }

  @Test
  void grepUsesRipgrepInTheSandbox() throws Exception {
    FileSystemTest.writeGrepTree(tools.workspace);
    // only ripgrep reads .ignore files: the proof that rg ran, not the fallback
    tools.workspace.writeText(".ignore", "ignored.txt\n");
    tools.workspace.writeText("ignored.txt", "TODO ignored\n");
    FileSystemTest.assertGrepFormats(tools, FileSystem.create());
    assertThat(
            tools.call(
                FileSystem.builder().ripgrep(false).build(),
                "grep",
                "{\"pattern\": \"TODO ignored\"}"))
        .isEqualTo("ignored.txt:1:TODO ignored");
  }

  @Test
  void aCommandPastItsTimeoutIsKilledWithWhatItStarted() throws Exception {
    Shell shell = Shell.create();
    String out =
        tools.call(
            shell,
            "run_command",
            "{\"command\": \"sleep 300 & echo $! > /tmp/bg.pid; echo waiting; sleep 300\","
                + " \"timeout_seconds\": 1}");
    assertThat(out).isEqualTo("[stdout]\nwaiting\n[Command timed out after 1s]");
    String check =
        tools.call(
            shell,
            "run_command",
            "{\"command\": \"if kill -0 $(cat /tmp/bg.pid) 2>/dev/null; then echo alive; else echo"
                + " gone; fi\"}");
    assertThat(check).isEqualTo("[stdout]\ngone");
  }

  @Test
  void anEditRoundTrip() throws Exception {
    FileSystem fs = FileSystem.create();
    String written =
        tools.call(
            fs,
            "write_file",
            "{\"path\": \"proj/calc.py\", \"content\": \"def add(a, b):\\n    return a - b\\n\"}");
    assertThat(written).startsWith("Wrote 32 chars (2 lines) to proj/calc.py. [hash:");
    String read = tools.call(fs, "read_file", "{\"path\": \"proj/calc.py\"}");
    assertThat(read).endsWith("     1\tdef add(a, b):\n     2\t    return a - b\n");
    String hash = hash(read);
    assertThat(hash).isEqualTo(hash(written));
    String edited =
        tools.call(
            fs,
            "edit_file",
            "{\"path\": \"proj/calc.py\", \"old_text\": \"a - b\", \"new_text\": \"a + b\","
                + " \"expected_hash\": \""
                + hash
                + "\"}");
    assertThat(edited).startsWith("Edited proj/calc.py. [hash:");
    assertThat(
            tools.error(
                fs,
                "edit_file",
                "{\"path\": \"proj/calc.py\", \"old_text\": \"a + b\", \"new_text\": \"a * b\","
                    + " \"expected_hash\": \""
                    + hash
                    + "\"}"))
        .startsWith("Conflict: file 'proj/calc.py' has changed");
    assertThat(
            tools.call(
                Shell.create(),
                "run_command",
                "{\"command\": \"python3 -c 'import sys; sys.path.insert(0, \\\"proj\\\"); import"
                    + " calc; print(calc.add(2, 3))'\"}"))
        .isEqualTo("[stdout]\n5");
    assertThat(tools.error(fs, "read_file", "{\"path\": \"/etc/passwd\"}"))
        .contains("resolves outside the root directory");
  }

  private static String hash(String output) {
    Matcher m = Pattern.compile("hash:([0-9a-f]{12})").matcher(output);
    assertThat(m.find()).isTrue();
    return m.group(1);
  }
}
