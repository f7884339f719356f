package dev.sandbox4j.workspace;

/**
 * The path, or a directory on the way to it, does not exist. Mirrors {@code
 * java.nio.file.NoSuchFileException}.
 */
public class WorkspaceNoSuchFileException extends WorkspaceFileException {
  private static final long serialVersionUID = 1L;

  /** For {@code path}, with the default reason. */
  public WorkspaceNoSuchFileException(String path) {
    super(path, "no such file or directory");
  }

  /** For {@code path}, with a specific reason. */
  public WorkspaceNoSuchFileException(String path, String reason) {
    super(path, reason);
  }
}
