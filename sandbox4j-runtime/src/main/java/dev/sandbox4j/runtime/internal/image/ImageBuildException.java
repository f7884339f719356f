package dev.sandbox4j.runtime.internal.image;

import dev.sandbox4j.workspace.WorkspaceException;

/** Building an image failed; the message says why (and what the build tool printed last). */
public final class ImageBuildException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  public ImageBuildException(String message) {
    super(message);
  }

  public ImageBuildException(String message, Throwable cause) {
    super(message, cause);
  }
}
