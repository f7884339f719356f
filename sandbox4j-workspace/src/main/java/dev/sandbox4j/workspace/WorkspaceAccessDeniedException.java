package dev.sandbox4j.workspace;

/**
 * The workspace user may not do this (Unix permissions, an immutable file, or a rule such as never
 * removing the working directory). Mirrors {@code java.nio.file.AccessDeniedException}.
 */
public class WorkspaceAccessDeniedException extends WorkspaceFileException {
  private static final long serialVersionUID = 1L;

  /** For {@code path}, with the default reason. */
  public WorkspaceAccessDeniedException(String path) {
    super(path, "permission denied");
  }

  /** For {@code path}, with a specific reason. */
  public WorkspaceAccessDeniedException(String path, String reason) {
    super(path, reason);
  }
}
