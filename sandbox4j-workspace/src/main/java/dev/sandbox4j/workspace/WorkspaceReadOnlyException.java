package dev.sandbox4j.workspace;

/**
 * The workspace was opened read-only ({@link Workspace#readOnly()}) and the operation would write
 * or run a command. Tell the model it may only read.
 */
public class WorkspaceReadOnlyException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  /** With a message naming the refused operation. */
  public WorkspaceReadOnlyException(String message) {
    super(message);
  }
}
