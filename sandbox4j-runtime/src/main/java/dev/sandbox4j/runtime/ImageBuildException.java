package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;

/** Building an image failed; the message says why (and what the build tool printed last). */
final class ImageBuildException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  ImageBuildException(String message) {
    super(message);
  }

  ImageBuildException(String message, Throwable cause) {
    super(message, cause);
  }
}
