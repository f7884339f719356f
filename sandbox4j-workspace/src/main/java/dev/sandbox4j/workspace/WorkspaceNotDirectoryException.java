package dev.sandbox4j.workspace;

/**
 * The operation needs a directory (the path itself, or one on the way to it), but found something
 * else. Mirrors {@code java.nio.file.NotDirectoryException}.
 */
public class WorkspaceNotDirectoryException extends WorkspaceFileException {
  private static final long serialVersionUID = 1L;

  /** For {@code path}, with the default reason. */
  public WorkspaceNotDirectoryException(String path) {
    super(path, "not a directory");
  }

  /** For {@code path}, with a specific reason. */
  public WorkspaceNotDirectoryException(String path, String reason) {
    super(path, reason);
  }
}
