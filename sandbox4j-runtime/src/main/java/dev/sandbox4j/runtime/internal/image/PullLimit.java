package dev.sandbox4j.runtime.internal.image;

/**
 * What one pull may take from the host: at most {@code maxBytes} for the image, both as its layers
 * are downloaded (compressed, as the manifest gives their sizes) and as they are extracted (the
 * sizes of their files, read from each layer before it is extracted); and never the file system of
 * the store below {@code reserveBytes} of free space. A registry serves what any client asks for,
 * so an image is as untrusted as a sandbox: a layer of a few KiB can hold terabytes of zeros.
 *
 * @param maxBytes the most an image may hold; {@link Long#MAX_VALUE}: no bound, and layers are not
 *     read before they are extracted
 * @param reserveBytes the free space the store's file system keeps
 */
public record PullLimit(long maxBytes, long reserveBytes) {
  public PullLimit {
    if (maxBytes <= 0) {
      throw new IllegalArgumentException("maxBytes must be positive, was " + maxBytes);
    }
    if (reserveBytes < 0) {
      throw new IllegalArgumentException("reserveBytes must not be negative, was " + reserveBytes);
    }
  }

  /** Whether images have a size bound (then each layer is read before it is extracted). */
  boolean bounded() {
    return maxBytes != Long.MAX_VALUE;
  }
}
