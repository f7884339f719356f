package dev.sandbox4j.workspace;

/** The root of every failure the workspace API reports; unchecked. */
public class WorkspaceException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** With a message. */
  public WorkspaceException(String message) {
    super(message);
  }

  /** With a message and a cause. */
  public WorkspaceException(String message, Throwable cause) {
    super(message, cause);
  }
}
