package dev.sandbox4j.cli;

/**
 * The exit statuses sandbox4j itself returns. {@code exec} otherwise exits with the command's own
 * status, so these avoid 1 and 2, which commands use all the time: the usage and unavailable codes
 * come from BSD's {@code sysexits.h}, the timeout code from GNU {@code timeout}.
 */
final class ExitCodes {
  /** Success (for {@code exec}: the command exited 0). */
  static final int OK = 0;

  /** The command line was wrong: unknown option, malformed ref or duration, unknown provider. */
  static final int USAGE = 64;

  /** The workspace is gone or never existed (sysexits {@code EX_UNAVAILABLE}). */
  static final int UNAVAILABLE = 69;

  /**
   * Anything else went wrong in sandbox4j or the workspace provider; for {@code doctor} and {@code
   * setup}, a host prerequisite is missing.
   */
  static final int FAILURE = 70;

  /** The command ran past {@code --timeout} and was killed, as GNU {@code timeout} exits. */
  static final int TIMEOUT = 124;

  /** The command's output passed {@code --output-limit} and it was killed. */
  static final int OUTPUT_LIMIT = 125;

  /** Interrupted (Ctrl-C); the command was killed. 128 + SIGINT, as shells report it. */
  static final int INTERRUPTED = 130;

  /** The table for {@code --help}, in picocli's {@code key:description} form. */
  static final String[] HELP = {
    "0:success",
    "64:usage error (bad option, ref, duration or provider)",
    "69:workspace unavailable (destroyed or never existed)",
    "70:any other sandbox4j or provider failure; doctor, setup: a prerequisite is missing",
    "124:exec: the command timed out and was killed",
    "125:exec: the command's output passed the limit and it was killed",
    "130:interrupted (Ctrl-C); a running command was killed",
    "other:exec: the command's own exit status",
  };

  private ExitCodes() {}
}
