package dev.sandbox4j.workspace;

/**
 * The workspace is gone (destroyed, expired, or never existed) or cannot be reached. Don't retry
 * with the same ref: a new workspace needs a new ref. Sandbox4j never replaces a gone workspace
 * with an empty one.
 */
public class WorkspaceUnavailableException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  /** With a message that names the workspace. */
  public WorkspaceUnavailableException(String message) {
    super(message);
  }

  /** With a message and a cause. */
  public WorkspaceUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
