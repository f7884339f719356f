package dev.sandbox4j.runtime.internal.image;

import dev.sandbox4j.workspace.WorkspaceException;

/**
 * A pull refused for what it would take ({@link PullLimit}): the image is larger than the limit
 * ({@link #overLimit}), or the store's file system would go below its reserve. Nothing of the image
 * was published; what it downloaded is deleted.
 */
public final class PullRefusedException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final boolean overLimit;
  private final long bytes;
  private final long bound;

  /**
   * @param overLimit true: {@code bytes} is the image's size and {@code bound} the limit; false:
   *     {@code bytes} is the free space and {@code bound} the reserve
   */
  PullRefusedException(String message, boolean overLimit, long bytes, long bound) {
    super(message);
    this.overLimit = overLimit;
    this.bytes = bytes;
    this.bound = bound;
  }

  /** True if the image is larger than the limit; false if the disk has too little free space. */
  public boolean overLimit() {
    return overLimit;
  }

  /** The image's size (over the limit), or the free space (disk). */
  public long bytes() {
    return bytes;
  }

  /** The limit, or the reserve. */
  public long bound() {
    return bound;
  }
}
