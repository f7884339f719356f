package dev.sandbox4j.runtime.internal.image;

import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * An image on disk: a name for an ordered stack of read-only layers, ready to be the lower layers
 * of sandboxes' overlay mounts.
 *
 * <p>A layer is a directory {@code images/layers/<id>/} named by a sha256 hex id (see {@link
 * ImageStore}); it holds the files that layer adds or changes, with overlayfs' own markers for what
 * it takes away: a whiteout (character device 0/0) hides a name of the layers below, and the {@code
 * trusted.overlay.opaque=y} attribute makes a directory hide their whole directory.
 *
 * <p>Every file is already owned by host ids shifted by {@link #UID_SHIFT} (the canonical block): a
 * sandbox sees them through idmapped mounts that map the canonical block to its own block of host
 * ids (the engine's {@code IdBlocks} and {@code Overlay}), so a file owned by host uid 100000 is
 * root's inside, and nothing in an image is owned by real host root.
 *
 * @param name its name in the store
 * @param layerIds the ids of its layers, <b>bottom first</b> (the base system first, the last step
 *     of a recipe last)
 * @param layers the layer directories, in the same order as {@code layerIds}: bottom first
 * @param created when it was built or imported
 * @param sizeBytes the size of the regular files of all its layers
 * @param description what is in it
 * @param origin the registry reference it was pulled from and its config, for an image that came
 *     from elsewhere (pulled or imported); null for Sandbox4j's own images (the default, recipes,
 *     snapshots), which follow the seeds' conventions (user {@code sandbox}, {@code /home/sandbox})
 */
public record Image(
    String name,
    List<String> layerIds,
    List<Path> layers,
    Instant created,
    long sizeBytes,
    String description,
    ImageStore.Origin origin) {
  /** The host id that container id 0 maps to. */
  public static final int UID_SHIFT = 100_000;

  /** How many ids the user namespace maps (container 0..65535). */
  public static final int ID_RANGE = 65_536;

  public Image {
    Objects.requireNonNull(name, "name");
    layerIds = List.copyOf(layerIds);
    layers = List.copyOf(layers);
    Objects.requireNonNull(created, "created");
    Objects.requireNonNull(description, "description");
    if (layerIds.size() != layers.size() || layers.isEmpty()) {
      throw new IllegalArgumentException("an image has one path per layer id, and one or more");
    }
  }

  /** An image of Sandbox4j's own (no origin). */
  public Image(
      String name,
      List<String> layerIds,
      List<Path> layers,
      Instant created,
      long sizeBytes,
      String description) {
    this(name, layerIds, layers, created, sizeBytes, description, null);
  }
}
