package dev.sandbox4j.workspace;

import java.time.Duration;

/**
 * A command ran past its deadline. Every process it started has been killed, the workspace is still
 * up, and the output written before the deadline is kept.
 */
public class WorkspaceTimeoutException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final Duration timeout;
  private final byte[] partialStdout;
  private final byte[] partialStderr;

  /** With the deadline that was enforced and the output collected until then. */
  public WorkspaceTimeoutException(Duration timeout, byte[] partialStdout, byte[] partialStderr) {
    super("command timed out after " + Durations.describe(timeout));
    this.timeout = timeout;
    this.partialStdout = partialStdout.clone();
    this.partialStderr = partialStderr.clone();
  }

  /** The deadline that was enforced. */
  public Duration timeout() {
    return timeout;
  }

  /** stdout written before the deadline. */
  public byte[] partialStdout() {
    return partialStdout.clone();
  }

  /** stderr written before the deadline. */
  public byte[] partialStderr() {
    return partialStderr.clone();
  }

  /** {@link #partialStdout()} as text, invalid UTF-8 replaced. */
  public String partialStdoutText() {
    return Texts.decode(partialStdout);
  }

  /** {@link #partialStderr()} as text, invalid UTF-8 replaced. */
  public String partialStderrText() {
    return Texts.decode(partialStderr);
  }
}
