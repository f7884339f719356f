package dev.sandbox4j.workspace;

/**
 * Something already exists at the path. Mirrors {@code java.nio.file.FileAlreadyExistsException}.
 */
public class WorkspaceFileAlreadyExistsException extends WorkspaceFileException {
  private static final long serialVersionUID = 1L;

  /** For {@code path}, with the default reason. */
  public WorkspaceFileAlreadyExistsException(String path) {
    super(path, "already exists");
  }

  /** For {@code path}, with a specific reason. */
  public WorkspaceFileAlreadyExistsException(String path, String reason) {
    super(path, reason);
  }
}
