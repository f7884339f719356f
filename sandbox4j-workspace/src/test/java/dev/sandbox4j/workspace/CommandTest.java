package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CommandTest {

  @Test
  void argvIsKeptAsGiven() {
    assertThat(Command.argv("ls", "-la", "*.txt").toArgv()).containsExactly("ls", "-la", "*.txt");
    assertThat(Command.argv(List.of("echo", "")).toArgv()).containsExactly("echo", "");
  }

  @Test
  void shellRunsUnderBinSh() {
    assertThat(Command.shell("echo $HOME").toArgv()).containsExactly("/bin/sh", "-c", "echo $HOME");
  }

  @Test
  void bashRunsUnderBashAndRefusesWhatShellRefuses() {
    assertThat(Command.bash("a=(1 2); echo ${a[1]}").toArgv())
        .containsExactly("bash", "-c", "a=(1 2); echo ${a[1]}");
    assertThatThrownBy(() -> Command.bash(" ")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Command.bash("echo \0")).isInstanceOf(IllegalArgumentException.class);
  }

  /** On a host whose sh is not bash (Debian's dash), the two differ where a client expects bash. */
  @Test
  void aBashScriptNeedsBashWhereShIsDash(@TempDir Path root) throws IOException {
    Prerequisites.require(Files.isExecutable(Path.of("/bin/bash")), "bash");
    Workspace ws = Workspace.of(HostWorkspaceProvider.create(root).newBackend());
    String script = "[[ 1 == 1 ]] && echo yes";
    assertThat(ws.run(Command.bash(script)).stdoutText()).isEqualTo("yes\n");
    if (Path.of("/bin/sh").toRealPath().getFileName().toString().equals("dash")) {
      assertThat(ws.run(Command.shell(script)).exitCode()).isNotZero();
    }
  }

  @Test
  void argvIsCopied() {
    List<String> args = new ArrayList<>(List.of("echo", "a"));
    Command c = Command.argv(args);
    args.set(1, "changed");
    assertThat(c.toArgv()).containsExactly("echo", "a");
    String[] array = {"echo", "a"};
    Command fromArray = Command.argv(array);
    array[1] = "changed";
    assertThat(fromArray.toArgv()).containsExactly("echo", "a");
  }

  @Test
  void emptyArgvAndBlankShellAreRejected() {
    assertThatThrownBy(Command::argv)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("empty");
    assertThatThrownBy(() -> Command.argv(List.of())).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Command.argv("", "x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("argv[0]");
    assertThatThrownBy(() -> Command.shell("  \n\t"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blank");
    assertThatThrownBy(() -> Command.shell(null)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void nulAndNullAreRejected() {
    assertThatThrownBy(() -> Command.argv("echo", "a\0b"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("argv[1] contains NUL");
    assertThatThrownBy(() -> Command.argv("echo", null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("argv[1] is null");
    assertThatThrownBy(() -> Command.shell("echo \0")).isInstanceOf(IllegalArgumentException.class);
  }
}
