package dev.sandbox4j.cli;

import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;

/**
 * What a run of the CLI reads from its surroundings, passed in so tests can run it in-process.
 *
 * @param home the sandbox4j state directory ({@code $SANDBOX4J_HOME}; default {@code
 *     /var/lib/sandbox4j} as root, {@code ~/.sandbox4j} otherwise)
 * @param in stdin, fed to a command only with {@code exec --stdin}
 * @param out stdout: results, and a command's stdout
 * @param err stderr: messages, and a command's stderr
 * @param env the environment variables the CLI reads ({@code SANDBOX4J_URL}, {@code
 *     SANDBOX4J_API_KEY}, and {@code TERM}, {@code CI} and {@code COLUMNS} for progress); never
 *     passed on to a sandbox
 * @param terminal whether {@code err} is a terminal, where progress may redraw its line
 * @param cwd the caller's working directory, against which host paths ({@code cp}) resolve: a
 *     resident process's own is not its client's
 */
record CliContext(
    Path home,
    InputStream in,
    PrintStream out,
    PrintStream err,
    Map<String, String> env,
    boolean terminal,
    Path cwd) {
  CliContext {
    Objects.requireNonNull(home, "home");
    Objects.requireNonNull(in, "in");
    Objects.requireNonNull(out, "out");
    Objects.requireNonNull(err, "err");
    home = home.toAbsolutePath().normalize();
    env = Map.copyOf(Objects.requireNonNull(env, "env"));
    cwd = cwd.toAbsolutePath().normalize();
  }

  /** In this JVM's working directory. */
  CliContext(
      Path home,
      InputStream in,
      PrintStream out,
      PrintStream err,
      Map<String, String> env,
      boolean terminal) {
    this(home, in, out, err, env, terminal, Path.of(""));
  }

  /** {@code path} as the caller means it: relative to its working directory. */
  Path hostPath(String path) {
    return cwd.resolve(path);
  }

  /** Not on a terminal. */
  CliContext(Path home, InputStream in, PrintStream out, PrintStream err, Map<String, String> env) {
    this(home, in, out, err, env, false);
  }

  /**
   * With no environment variables, not on a terminal: the local engine, unless {@code --server} is
   * given.
   */
  CliContext(Path home, InputStream in, PrintStream out, PrintStream err) {
    this(home, in, out, err, Map.of());
  }

  @Override
  public String toString() {
    return "CliContext[home=" + home + "]"; // never env: it may hold an API key
  }
}
