package dev.sandbox4j.workspace;

import java.util.List;

/**
 * A command to run in a workspace: an argv list executed directly, or a shell script run by {@code
 * /bin/sh -c}.
 *
 * <p>There is no implicit shell: {@code Command.argv("ls", "*.txt")} passes the literal {@code
 * *.txt}, while {@code Command.shell("ls *.txt")} globs.
 *
 * <p>{@link #shell} is POSIX {@code sh} (dash in Debian images), not bash: clients written for
 * other sandboxes often assume {@code bash -c}, and a script with arrays, {@code [[ … ]]}, {@code
 * set -o pipefail} or {@code source} needs {@link #bash}.
 */
public sealed interface Command {

  /**
   * A program and its arguments, executed without a shell; the program is looked up on the
   * command's {@code PATH}.
   *
   * @throws IllegalArgumentException if {@code args} is empty, the program is empty, or an argument
   *     is null or contains NUL
   */
  static Command argv(String... args) {
    if (args == null) {
      throw new IllegalArgumentException("argv must not be null");
    }
    return new Argv(List.of(checkedArgs(args)));
  }

  /** Same as {@link #argv(String...)}. */
  static Command argv(List<String> args) {
    if (args == null) {
      throw new IllegalArgumentException("argv must not be null");
    }
    return argv(args.toArray(String[]::new));
  }

  /**
   * A script for {@code /bin/sh -c}: POSIX sh, which is dash in Debian images (the local engine's
   * default image among them), not bash.
   *
   * @throws IllegalArgumentException if the script is blank or contains NUL
   * @see #bash
   */
  static Command shell(String script) {
    return new Shell(script);
  }

  /**
   * A script for {@code bash -c}, for scripts written for bash. The workspace must have {@code
   * bash} on its {@code PATH} (the local engine's default image has); where it has not, the command
   * exits 127.
   *
   * @throws IllegalArgumentException if the script is blank or contains NUL
   */
  static Command bash(String script) {
    return argv("bash", "-c", new Shell(script).script());
  }

  /** The argv that is executed: the args of an {@link Argv}, or {@code /bin/sh -c script}. */
  List<String> toArgv();

  /** A program and its arguments. */
  record Argv(List<String> args) implements Command {
    /** Validates and copies the arguments. */
    public Argv {
      if (args == null) {
        throw new IllegalArgumentException("argv must not be null");
      }
      args = List.of(checkedArgs(args.toArray(String[]::new)));
    }

    @Override
    public List<String> toArgv() {
      return args;
    }
  }

  /** A script run by {@code /bin/sh -c}. */
  record Shell(String script) implements Command {
    /** Validates the script. */
    public Shell {
      if (script == null || script.isBlank()) {
        throw new IllegalArgumentException("shell command must not be blank");
      }
      if (script.indexOf('\0') >= 0) {
        throw new IllegalArgumentException("shell command must not contain NUL");
      }
    }

    @Override
    public List<String> toArgv() {
      return List.of("/bin/sh", "-c", script);
    }
  }

  private static String[] checkedArgs(String[] args) {
    if (args.length == 0) {
      throw new IllegalArgumentException("argv must name a program: it is empty");
    }
    if (args[0] == null || args[0].isEmpty()) {
      throw new IllegalArgumentException("argv[0], the program, must not be empty");
    }
    for (int i = 0; i < args.length; i++) {
      if (args[i] == null) {
        throw new IllegalArgumentException("argv[" + i + "] is null");
      }
      if (args[i].indexOf('\0') >= 0) {
        throw new IllegalArgumentException("argv[" + i + "] contains NUL, which no exec can pass");
      }
    }
    return args.clone();
  }
}
