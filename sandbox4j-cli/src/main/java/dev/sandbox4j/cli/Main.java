package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.internal.util.SandboxHome;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/** The {@code sandbox4j} command. Run with {@code --help} for its subcommands and exit codes. */
public final class Main {

  /** How long a signal (Ctrl-C, SIGTERM) waits for a running command to be killed. */
  private static final long KILL_WAIT_SECONDS = 10;

  private Main() {}

  /**
   * Runs the CLI and exits with its exit code: through this user's resident process if one serves
   * the command ({@link ResidentClient}), else in this JVM.
   */
  public static void main(String[] args) {
    String resident = System.getProperty(ResidentClient.PROPERTY);
    if (resident != null) {
      Resident.main(Path.of(resident));
      System.exit(0);
      return;
    }
    int served = ResidentClient.tryServe(args);
    if (served == ResidentClient.SIGNALLED) {
      return;
    }
    if (served != ResidentClient.NOT_SERVED) {
      // Not System.exit: it logs the exit through System.Logger, whose lookup opens every jar on
      // the class path, the big one too. Nothing is left to run: the output went out unbuffered
      // and the only shutdown hook was removed.
      Runtime.getRuntime().halt(served);
      return;
    }
    Cli.ENGINE_LOG.setLevel(java.util.logging.Level.WARNING);
    CliContext context =
        new CliContext(
            home(System.getenv(), System.getProperty("user.home"), SandboxHome.isRoot()),
            System.in,
            System.out,
            System.err,
            System.getenv(),
            stderrIsTerminal());
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
    ResidentClient.startIfMissing();
    System.exit(code);
  }

  /**
   * Whether stderr is a terminal, where progress may redraw its line. Java tells only whether stdin
   * and stdout are ({@link java.io.Console#isTerminal}); on Linux, {@code /proc} tells where stderr
   * goes, so {@code 2>log} on a terminal still gets plain lines.
   */
  static boolean stderrIsTerminal() {
    java.io.Console console = System.console();
    if (console == null || !console.isTerminal()) {
      return false;
    }
    try {
      String target = java.nio.file.Files.readSymbolicLink(Path.of("/proc/self/fd/2")).toString();
      return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
    } catch (java.io.IOException | UnsupportedOperationException noProc) {
      return true; // no /proc (macOS): the console's word
    }
  }

  /**
   * The sandbox4j home: {@code $SANDBOX4J_HOME}; else, for root, the local engine's {@code
   * /var/lib/sandbox4j} (which the library uses too); else {@code ~/.sandbox4j}.
   */
  static Path home(Map<String, String> env, String userHome, boolean root) {
    return SandboxHome.of(env.get("SANDBOX4J_HOME"), userHome, root);
  }
}
