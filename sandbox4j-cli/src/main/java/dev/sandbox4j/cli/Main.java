package dev.sandbox4j.cli;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** The {@code sandbox4j} command. Run with {@code --help} for its subcommands and exit codes. */
public final class Main {

  /** How long a signal (Ctrl-C, SIGTERM) waits for a running command to be killed. */
  private static final long KILL_WAIT_SECONDS = 10;

  private Main() {}

  /** Runs the CLI and exits with its exit code. */
  public static void main(String[] args) {
    CliContext context =
        new CliContext(
            home(System.getenv(), System.getProperty("user.home")),
            System.in,
            System.out,
            System.err);
    // Each command runs in its own session, so a terminal's Ctrl-C reaches only this JVM: on the
    // way out, interrupt the run, which kills the command's processes, and wait for that.
    Thread worker = Thread.currentThread();
    CountDownLatch done = new CountDownLatch(1);
    Thread onSignal =
        new Thread(
            () -> {
              worker.interrupt();
              try {
                done.await(KILL_WAIT_SECONDS, TimeUnit.SECONDS);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            },
            "sandbox4j-shutdown");
    Runtime.getRuntime().addShutdownHook(onSignal);
    int code = Cli.run(context, args);
    done.countDown();
    try {
      Runtime.getRuntime().removeShutdownHook(onSignal);
    } catch (IllegalStateException shuttingDown) {
      return; // a signal is ending the JVM, with its own status; System.exit would block
    }
    System.exit(code);
  }

  /** {@code $SANDBOX4J_HOME}, or {@code ~/.sandbox4j}. */
  static Path home(Map<String, String> env, String userHome) {
    String home = env.get("SANDBOX4J_HOME");
    if (home != null && !home.isBlank()) {
      return Path.of(home).toAbsolutePath().normalize();
    }
    return Path.of(userHome, ".sandbox4j");
  }
}
