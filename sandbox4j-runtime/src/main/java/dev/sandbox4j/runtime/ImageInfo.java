package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.image.Image;
import java.time.Instant;
import java.util.Objects;

/**
 * An image on this machine, as {@link LocalSandbox#images()} shows it.
 *
 * @param name its name, which {@link LocalSandbox.Builder#image} takes ({@code default} is the
 *     Debian image the engine builds itself)
 * @param created when it was built
 * @param sizeBytes the size of its files
 * @param description what is in it
 */
public record ImageInfo(String name, Instant created, long sizeBytes, String description) {

  /** Checks that no component is null. */
  public ImageInfo {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(created, "created");
    Objects.requireNonNull(description, "description");
  }

  static ImageInfo of(Image image) {
    return new ImageInfo(image.name(), image.created(), image.sizeBytes(), image.description());
  }
}
