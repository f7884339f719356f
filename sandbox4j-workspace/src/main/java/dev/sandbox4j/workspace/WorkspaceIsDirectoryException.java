package dev.sandbox4j.workspace;

/**
 * The operation needs a file, but the path is a directory. Mirrors a {@code
 * java.nio.file.FileSystemException} whose reason is EISDIR.
 */
public class WorkspaceIsDirectoryException extends WorkspaceFileException {
  private static final long serialVersionUID = 1L;

  /** For {@code path}, with the default reason. */
  public WorkspaceIsDirectoryException(String path) {
    super(path, "is a directory");
  }

  /** For {@code path}, with a specific reason. */
  public WorkspaceIsDirectoryException(String path, String reason) {
    super(path, reason);
  }
}
