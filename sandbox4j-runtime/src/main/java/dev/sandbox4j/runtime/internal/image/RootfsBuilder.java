package dev.sandbox4j.runtime.internal.image;

import java.io.IOException;
import java.nio.file.Path;
import java.util.function.Consumer;

/**
 * Fills an empty directory with a root filesystem, owned by container ids (root = 0).
 *
 * <p>The seam exists so that the store's locking and publishing can be tested with a builder that
 * takes milliseconds instead of mmdebstrap's ~45 s.
 */
@FunctionalInterface
interface RootfsBuilder {
  /**
   * Builds into {@code target}, an existing empty directory; reports progress one line at a time.
   */
  void build(Path target, Consumer<String> progress) throws IOException;
}
