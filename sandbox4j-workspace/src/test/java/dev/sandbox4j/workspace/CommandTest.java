package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

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
