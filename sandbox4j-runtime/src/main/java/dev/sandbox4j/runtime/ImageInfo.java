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
 * @param reference the registry reference it was pulled from, canonical ({@code
 *     docker.io/library/python:3.12-slim}); null if it was not pulled
 * @param digest the digest of its manifest ({@code sha256:...}: for a pulled image, what the
 *     registry knows it by, which {@code name@digest} pulls again); null if none
 */
public record ImageInfo(
    String name,
    Instant created,
    long sizeBytes,
    String description,
    String reference,
    String digest) {

  /** Checks that no component but {@code reference} and {@code digest} is null. */
  public ImageInfo {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(created, "created");
    Objects.requireNonNull(description, "description");
  }

  static ImageInfo of(Image image) {
    return new ImageInfo(
        image.name(),
        image.created(),
        image.sizeBytes(),
        image.description(),
        image.origin() == null ? null : image.origin().reference(),
        image.origin() == null ? null : image.origin().digest());
  }
}
