package dev.sandbox4j.workspace;

/**
 * A command's combined stdout + stderr passed the limit ({@link RunOptions#outputLimit()}, 10 MiB
 * by default). Every process it started has been killed; the first {@link
 * RunOptions#OUTPUT_LIMIT_KEPT_BYTES} bytes of each stream are kept. Rerun with output redirected
 * to a file, or with a higher limit.
 */
public class WorkspaceOutputLimitException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final long limit;
  private final byte[] stdoutHead;
  private final byte[] stderrHead;

  /** With the limit and the first bytes of each stream (trimmed to 64 KiB each here). */
  public WorkspaceOutputLimitException(long limit, byte[] stdout, byte[] stderr) {
    super(
        "command output passed the limit of "
            + limit
            + " bytes (stdout and stderr combined); the command was killed");
    this.limit = limit;
    this.stdoutHead = head(stdout);
    this.stderrHead = head(stderr);
  }

  private static byte[] head(byte[] bytes) {
    return java.util.Arrays.copyOf(
        bytes, Math.min(bytes.length, RunOptions.OUTPUT_LIMIT_KEPT_BYTES));
  }

  /** The limit, in bytes. */
  public long limit() {
    return limit;
  }

  /** The first bytes (at most 64 KiB) of stdout. */
  public byte[] stdoutHead() {
    return stdoutHead.clone();
  }

  /** The first bytes (at most 64 KiB) of stderr. */
  public byte[] stderrHead() {
    return stderrHead.clone();
  }

  /** {@link #stdoutHead()} as text, invalid UTF-8 replaced. */
  public String stdoutHeadText() {
    return Texts.decode(stdoutHead);
  }

  /** {@link #stderrHead()} as text, invalid UTF-8 replaced. */
  public String stderrHeadText() {
    return Texts.decode(stderrHead);
  }
}
