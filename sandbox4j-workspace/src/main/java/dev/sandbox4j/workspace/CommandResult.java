package dev.sandbox4j.workspace;

import java.util.Arrays;

/**
 * What a finished command left: its exit code and everything it wrote to stdout and stderr.
 *
 * <p>A non-zero exit is a result, not an error. By shell convention a command ended by signal N
 * exits {@code 128 + N} (137 for SIGKILL). Output is kept as bytes; the text views decode UTF-8 and
 * replace invalid sequences with U+FFFD. Instances are immutable: the arrays are copied in and out.
 *
 * @param exitCode the command's exit status
 * @param stdout everything written to standard output
 * @param stderr everything written to standard error
 */
public record CommandResult(int exitCode, byte[] stdout, byte[] stderr) {

  /** Copies both streams. */
  public CommandResult {
    stdout = stdout == null ? new byte[0] : stdout.clone();
    stderr = stderr == null ? new byte[0] : stderr.clone();
  }

  /** A copy of standard output. */
  @Override
  public byte[] stdout() {
    return stdout.clone();
  }

  /** A copy of standard error. */
  @Override
  public byte[] stderr() {
    return stderr.clone();
  }

  /** Standard output as text (UTF-8, invalid sequences become U+FFFD). */
  public String stdoutText() {
    return Texts.decode(stdout);
  }

  /** Standard error as text (UTF-8, invalid sequences become U+FFFD). */
  public String stderrText() {
    return Texts.decode(stderr);
  }

  /** Whether the command exited 0. */
  public boolean succeeded() {
    return exitCode == 0;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CommandResult r
        && r.exitCode == exitCode
        && Arrays.equals(r.stdout, stdout)
        && Arrays.equals(r.stderr, stderr);
  }

  @Override
  public int hashCode() {
    return 31 * (31 * exitCode + Arrays.hashCode(stdout)) + Arrays.hashCode(stderr);
  }

  @Override
  public String toString() {
    return "CommandResult[exitCode="
        + exitCode
        + ", stdout="
        + Texts.preview(stdout)
        + ", stderr="
        + Texts.preview(stderr)
        + "]";
  }
}
