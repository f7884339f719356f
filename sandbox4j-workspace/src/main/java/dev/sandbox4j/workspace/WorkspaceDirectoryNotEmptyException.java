package dev.sandbox4j.workspace;

/**
 * The directory is not empty; remove it recursively or empty it first. Mirrors {@code
 * java.nio.file.DirectoryNotEmptyException}.
 */
public class WorkspaceDirectoryNotEmptyException extends WorkspaceFileException {
  private static final long serialVersionUID = 1L;

  /** For {@code path}, with the default reason. */
  public WorkspaceDirectoryNotEmptyException(String path) {
    super(path, "directory not empty");
  }

  /** For {@code path}, with a specific reason. */
  public WorkspaceDirectoryNotEmptyException(String path, String reason) {
    super(path, reason);
  }
}
