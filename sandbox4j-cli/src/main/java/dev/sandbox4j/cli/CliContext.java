package dev.sandbox4j.cli;

import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Objects;

/**
 * What a run of the CLI reads from its surroundings, passed in so tests can run it in-process.
 *
 * @param home the sandbox4j state directory ({@code $SANDBOX4J_HOME}; default {@code
 *     /var/lib/sandbox4j} as root, {@code ~/.sandbox4j} otherwise)
 * @param in stdin, fed to a command only with {@code exec --stdin}
 * @param out stdout: results, and a command's stdout
 * @param err stderr: messages, and a command's stderr
 */
record CliContext(Path home, InputStream in, PrintStream out, PrintStream err) {
  CliContext {
    Objects.requireNonNull(home, "home");
    Objects.requireNonNull(in, "in");
    Objects.requireNonNull(out, "out");
    Objects.requireNonNull(err, "err");
    home = home.toAbsolutePath().normalize();
  }
}
