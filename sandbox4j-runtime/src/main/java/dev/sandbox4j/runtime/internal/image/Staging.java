package dev.sandbox4j.runtime.internal.image;

import static dev.sandbox4j.runtime.internal.image.StoreLayout.BUILD_PREFIX;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.MANIFEST;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.NOFOLLOW;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.OLD_PREFIX;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.PINS;

import dev.sandbox4j.runtime.internal.image.ImageStore.Build;
import dev.sandbox4j.runtime.internal.image.ImageStore.BuildAction;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * How anything enters one image store (the default build, imports, recipes, snapshots): a build
 * runs in a staging area of its own, pins the layers it builds on so no gc takes them, moves each
 * new layer into {@code layers/} (or keeps the one already there: layers are deduplicated by id),
 * and publishes its image by renaming the manifest into place, which replaces the old image in one
 * step. Each build holds its name's lock (the caller takes it).
 */
final class Staging {
  private final StoreLayout layout;
  private final StoreLocks locks;
  private final Manifests manifests;
  private final StoreGc gc;

  Staging(StoreLayout layout, StoreLocks locks, Manifests manifests, StoreGc gc) {
    this.layout = layout;
    this.locks = locks;
    this.manifests = manifests;
    this.gc = gc;
  }

  /**
   * Runs {@code action} in a fresh staging area for {@code name} and deletes the area afterwards,
   * whatever happened. The caller holds {@code name}'s lock.
   */
  <T> T inStaging(String name, BuildAction<T> action) throws IOException {
    // We hold the name's lock: any leftover of this name is from a build or removal that died.
    for (Path leftover : layout.leftovers()) {
      if (StoreLayout.ownerOf(leftover).filter(name::equals).isPresent()) {
        Trees.delete(leftover);
      }
    }
    PrivateFiles.createPrivateDirectories(layout.imagesDir());
    Path staging =
        layout.imagesDir().resolve(BUILD_PREFIX + name + "-" + StoreLayout.randomSuffix());
    Files.createDirectory(
        staging,
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    T result;
    try {
      result = action.run(new Build(staging));
    } catch (IOException | RuntimeException | Error e) {
      try {
        Trees.delete(staging);
      } catch (IOException | RuntimeException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
    Trees.delete(staging);
    return result;
  }

  /** See {@link ImageStore#pin}. */
  void pin(Build build, Image image) {
    locks.withStoreLock(
        () -> {
          for (String id : image.layerIds()) {
            if (!Files.isDirectory(layout.layerPath(id), NOFOLLOW)) {
              throw new ImageBuildException(
                  "image '"
                      + image.name()
                      + "' changed while it was being used (a layer is gone): try again");
            }
          }
          build.pins.addAll(image.layerIds());
          writePins(build);
          return null;
        });
  }

  /** See {@link ImageStore#pinIfPresent}. */
  boolean pinIfPresent(Build build, String id) {
    return locks.withStoreLock(
        () -> {
          if (!Files.isDirectory(layout.layerPath(id), NOFOLLOW)) {
            return false;
          }
          build.pins.add(id);
          writePins(build);
          return true;
        });
  }

  /** See {@link ImageStore#addLayer}. */
  void addLayer(Build build, Path dir, String id) throws IOException {
    Path target = layout.layerPath(id);
    // The rename below must not become durable before the files it publishes.
    HostCommand.check(List.of("sync", "--file-system", dir.toString()));
    boolean duplicate =
        locks.withStoreLock(
            () -> {
              layout.ensureLayersDir();
              build.pins.add(id);
              writePins(build);
              if (Files.exists(target, NOFOLLOW)) {
                return true;
              }
              Files.move(dir, target, StandardCopyOption.ATOMIC_MOVE);
              AtomicFiles.syncDirectory(layout.layersDir());
              return false;
            });
    if (duplicate) {
      Trees.delete(dir);
    }
  }

  /** See {@link ImageStore#publish}. */
  Image publish(
      Build build,
      String name,
      List<String> layerIds,
      long sizeBytes,
      String description,
      List<String> packages,
      ImageStore.Snapshot snapshot,
      ImageStore.Origin origin)
      throws IOException {
    Instant created = Instant.now();
    Manifests.Manifest manifest =
        new Manifests.Manifest(
            Manifests.FORMAT_VERSION,
            name,
            created.toString(),
            sizeBytes,
            description,
            packages,
            List.copyOf(layerIds),
            snapshot,
            origin);
    Path manifestDir = Files.createDirectory(build.dir().resolve("image"));
    Files.setPosixFilePermissions(manifestDir, PrivateFiles.PRIVATE_DIR);
    Manifests.write(manifestDir.resolve(MANIFEST), manifest);
    Path imagesDir = layout.imagesDir();
    Path target = imagesDir.resolve(name);
    List<Path> trash =
        locks.withStoreLock(
            () -> {
              for (String id : layerIds) {
                if (!build.pins.contains(id)
                    || !Files.isDirectory(layout.layerPath(id), NOFOLLOW)) {
                  throw new ImageBuildException(
                      "cannot publish image "
                          + name
                          + ": its layer "
                          + id
                          + " is not in the store");
                }
              }
              List<String> oldLayers = List.of();
              Path old = null;
              if (Files.exists(target, NOFOLLOW)) {
                // a format-1 rootfs may be a running sandbox's layer
                manifests.migrateQuietly(name);
                oldLayers = manifests.layerIdsOf(name);
                old = imagesDir.resolve(OLD_PREFIX + name + "-" + StoreLayout.randomSuffix());
                Files.move(target, old, StandardCopyOption.ATOMIC_MOVE);
              }
              Files.move(manifestDir, target, StandardCopyOption.ATOMIC_MOVE);
              AtomicFiles.syncDirectory(imagesDir);
              List<Path> unused = new ArrayList<>();
              if (old != null) {
                unused.add(old);
                unused.addAll(gc.trashUnused(oldLayers));
              }
              return unused;
            });
    for (Path p : trash) {
      Trees.delete(p);
    }
    return new Image(
        name,
        layerIds,
        layerIds.stream().map(layout::layerPath).toList(),
        created,
        sizeBytes,
        description,
        origin);
  }

  private void writePins(Build build) throws IOException {
    AtomicFiles.write(
        build.dir().resolve(PINS),
        String.join("\n", build.pins).concat("\n").getBytes(StandardCharsets.UTF_8));
  }
}
