package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;

/**
 * A pull refused because the image is larger than the engine's {@link
 * LocalSandbox.Builder#maxImageSize}: compressed as its manifest gives its layers, or extracted as
 * its layers list their files. Nothing of the image was kept. Retrying fails the same way: pull a
 * smaller image, or raise the limit.
 */
public final class ImageTooLargeException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final long sizeBytes;
  private final long limitBytes;

  /**
   * @param message what was refused, naming the image, its size and the limit
   * @param sizeBytes the image's size as far as it was counted when refused
   * @param limitBytes the limit
   */
  public ImageTooLargeException(String message, long sizeBytes, long limitBytes) {
    super(message);
    this.sizeBytes = sizeBytes;
    this.limitBytes = limitBytes;
  }

  /** The image's size as far as it was counted when refused, in bytes (at least the limit). */
  public long sizeBytes() {
    return sizeBytes;
  }

  /** The limit, in bytes. */
  public long limitBytes() {
    return limitBytes;
  }
}
