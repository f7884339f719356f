package dev.sandbox4j.boxd;

import dev.sandbox4j.workspace.Command;
import java.util.List;
import java.util.Map;

/**
 * The shell line an {@code Exec} carries. boxd's {@code ExecChunk} has a {@code command} string,
 * run by a shell as the machine's user, and no fields for argv, working directory or environment;
 * so the line changes directory, then {@code exec}s {@code env} with the variables and the argv,
 * every word single-quoted. {@code env} exits 127 for a missing program and 126 for one that is not
 * executable, as the workspace contract wants.
 */
final class BoxdCommandLine {

  private BoxdCommandLine() {}

  static String of(Command command, String workingDirectory, Map<String, String> env) {
    StringBuilder line = new StringBuilder("cd -- ").append(quote(workingDirectory));
    line.append(" && exec env --");
    env.forEach((name, value) -> line.append(' ').append(quote(name + "=" + value)));
    List<String> argv = command.toArgv();
    for (String word : argv) {
      line.append(' ').append(quote(word));
    }
    return line.toString();
  }

  /** {@code 'word'}, with each {@code '} written as {@code '\''}: nothing in it is expanded. */
  static String quote(String word) {
    return "'" + word.replace("'", "'\\''") + "'";
  }
}
