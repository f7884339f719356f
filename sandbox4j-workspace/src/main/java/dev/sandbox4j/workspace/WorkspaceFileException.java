package dev.sandbox4j.workspace;

/**
 * A file operation failed. The subclasses name the common causes and mirror {@code java.nio.file}'s
 * checked exceptions of the same names; this class itself covers the rest (for example reading a
 * FIFO or device, which is refused at once).
 */
public class WorkspaceFileException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final String path;

  /** For {@code path} (a path inside the workspace), with a reason. */
  public WorkspaceFileException(String path, String reason) {
    super(path + ": " + reason);
    this.path = path;
  }

  /** With a cause. */
  public WorkspaceFileException(String path, String reason, Throwable cause) {
    super(path + ": " + reason, cause);
    this.path = path;
  }

  /** The path inside the workspace that the operation failed on. */
  public String path() {
    return path;
  }
}
