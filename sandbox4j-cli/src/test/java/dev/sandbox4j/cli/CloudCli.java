package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The CLI in this JVM with a given environment, as {@link ModalCliTest} and {@link BoxdCliTest} run
 * it against their services' fakes: one command, or {@code serve} on a thread of its own.
 */
final class CloudCli {
  private CloudCli() {}

  record Run(int exitCode, String out, String err) {}

  /** Runs one command line with {@code env} as the CLI's environment, in home {@code home}. */
  static Run run(Path home, Map<String, String> env, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(home, new ByteArrayInputStream(new byte[0]), o, e, env), args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  /** {@code sandbox4j serve --provider PROVIDER}, running until closed; {@link #uri} once up. */
  static final class Served implements AutoCloseable {
    private final Thread serving;
    private final String uri;

    Served(Path home, Map<String, String> env, String provider, Path data, String... more)
        throws Exception {
      java.util.List<String> args =
          new java.util.ArrayList<>(
              java.util.List.of(
                  "serve", "--provider", provider, "--port", "0", "--data", data.toString()));
      args.addAll(java.util.List.of(more));
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      PrintStream errStream = new PrintStream(err, true, StandardCharsets.UTF_8);
      serving =
          Thread.ofVirtual()
              .start(
                  () ->
                      Cli.run(
                          new CliContext(
                              home,
                              new ByteArrayInputStream(new byte[0]),
                              new PrintStream(new ByteArrayOutputStream()),
                              errStream,
                              env),
                          args.toArray(String[]::new)));
      Matcher found = Pattern.compile("serving on (http://\\S+)").matcher("");
      for (int i = 0; i < 600 && !found.reset(err.toString(StandardCharsets.UTF_8)).find(); i++) {
        Thread.sleep(50);
      }
      boolean up = found.reset(err.toString(StandardCharsets.UTF_8)).find();
      if (!up) {
        close();
      }
      assertThat(up).as(err.toString(StandardCharsets.UTF_8)).isTrue();
      uri = found.group(1);
    }

    String uri() {
      return uri;
    }

    @Override
    public void close() throws InterruptedException {
      serving.interrupt();
      serving.join();
    }
  }
}
