package dev.sandbox4j.runtime;

import java.nio.file.Path;
import java.time.Instant;
import java.util.Objects;

/**
 * A root filesystem image on disk, ready to be the read-only lower layer of sandboxes.
 *
 * <p>Its files are already owned by host ids shifted by {@link #UID_SHIFT}: sandboxes run in a user
 * namespace that maps container ids {@code 0..ID_RANGE-1} to host {@code UID_SHIFT..}, so a file
 * owned by host uid 100000 is root's inside, and nothing in the image is owned by real host root.
 */
record Image(String name, Path rootfs, Instant created, long sizeBytes, String description) {
  /** The host id that container id 0 maps to. */
  static final int UID_SHIFT = 100_000;

  /** How many ids the user namespace maps (container 0..65535). */
  static final int ID_RANGE = 65_536;

  Image {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(rootfs, "rootfs");
    Objects.requireNonNull(created, "created");
    Objects.requireNonNull(description, "description");
  }
}
