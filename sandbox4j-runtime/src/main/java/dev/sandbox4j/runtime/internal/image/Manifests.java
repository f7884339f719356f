package dev.sandbox4j.runtime.internal.image;

import static dev.sandbox4j.runtime.internal.image.StoreLayout.MANIFEST;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.NOFOLLOW;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.ROOTFS;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The manifests ({@code <name>/image.json}) of one image store: reading them into {@link Image}s,
 * writing them, and moving a format-1 image (before layers: {@code <name>/rootfs/}) to a layer of
 * its own the first time it is read. A manifest that cannot be read is a damaged image, reported
 * with how to repair it, never skipped.
 */
final class Manifests {
  static final int FORMAT_VERSION = 2;
  private static final int LEGACY_FORMAT_VERSION = 1;

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  /**
   * What {@code image.json} holds; {@code created} as ISO-8601, which needs no Jackson module.
   * {@code layers} bottom first; null in format 1. {@code snapshot} is null unless the image is a
   * sandbox's snapshot; {@code origin} null unless it came from a registry or an archive (and in
   * manifests written before origins).
   */
  record Manifest(
      int formatVersion,
      String name,
      String created,
      long sizeBytes,
      String description,
      List<String> packages,
      List<String> layers,
      ImageStore.Snapshot snapshot,
      ImageStore.Origin origin) {}

  private final StoreLayout layout;
  private final StoreLocks locks;

  Manifests(StoreLayout layout, StoreLocks locks) {
    this.layout = layout;
    this.locks = locks;
  }

  /** The complete image called {@code name}, if there is one. */
  Optional<Image> find(String name) {
    // A rebuild renames the old manifest away, then the new one in, then deletes the old layers no
    // one uses: a reader caught between may find a layer gone. Look again before calling it
    // damaged.
    for (int attempt = 1; ; attempt++) {
      Optional<Manifest> manifest = read(name);
      if (manifest.isEmpty()) {
        return Optional.empty();
      }
      if (manifest.get().formatVersion() == LEGACY_FORMAT_VERSION) {
        Optional<Image> legacy = migrateOrView(name, manifest.get());
        if (legacy.isPresent()) {
          return legacy;
        }
        continue; // migrated: read the new manifest
      }
      Image image = toImage(name, manifest.get());
      Optional<Path> missing =
          image.layers().stream().filter(l -> !Files.isDirectory(l, NOFOLLOW)).findFirst();
      if (missing.isEmpty()) {
        return Optional.of(image);
      }
      if (attempt >= 3) {
        throw damaged(name, "its layer " + missing.get() + " is missing", null);
      }
    }
  }

  /** Image {@code name}'s manifest, if it has one; damaged if unreadable or invalid. */
  Optional<Manifest> read(String name) {
    Path manifestFile = layout.manifestFile(name);
    Manifest manifest;
    try {
      manifest = JSON.readValue(Files.readAllBytes(manifestFile), Manifest.class);
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (AccessDeniedException e) {
      throw new WorkspaceException(
          "cannot read image "
              + name
              + ": "
              + manifestFile
              + " is not readable by this user (an image store belongs to the user that made it;"
              + " run as that user, or set SANDBOX4J_HOME to a state directory of your own)",
          e);
    } catch (IOException e) {
      throw damaged(name, manifestFile + " is unreadable: " + e.getMessage(), e);
    }
    int version = manifest.formatVersion();
    if (version != FORMAT_VERSION && version != LEGACY_FORMAT_VERSION) {
      throw damaged(
          name,
          manifestFile
              + " has format version "
              + version
              + ", this sandbox4j reads "
              + LEGACY_FORMAT_VERSION
              + " and "
              + FORMAT_VERSION,
          null);
    }
    if (version == FORMAT_VERSION
        && (manifest.layers() == null
            || manifest.layers().isEmpty()
            || !manifest.layers().stream()
                .allMatch(id -> id != null && StoreLayout.LAYER_ID.matcher(id).matches()))) {
      throw damaged(name, manifestFile + " lists no valid layers", null);
    }
    return Optional.of(manifest);
  }

  /** Writes {@code manifest} to {@code file} atomically. */
  static void write(Path file, Manifest manifest) throws IOException {
    AtomicFiles.write(file, JSON.writeValueAsBytes(manifest));
  }

  private Image toImage(String name, Manifest manifest) {
    Instant created;
    try {
      created = Instant.parse(manifest.created());
    } catch (DateTimeParseException | NullPointerException e) {
      throw damaged(name, layout.manifestFile(name) + " has no valid created time", e);
    }
    List<String> ids =
        manifest.formatVersion() == LEGACY_FORMAT_VERSION
            ? List.of(StoreLayout.legacyLayerId(name))
            : manifest.layers();
    List<Path> paths =
        manifest.formatVersion() == LEGACY_FORMAT_VERSION
            ? List.of(layout.imagesDir().resolve(name).resolve(ROOTFS))
            : ids.stream().map(layout::layerPath).toList();
    return new Image(
        name,
        ids,
        paths,
        created,
        manifest.sizeBytes(),
        manifest.description() == null ? "" : manifest.description(),
        manifest.origin());
  }

  /**
   * Turns format-1 image {@code name} into a one-layer image; empty once done. Where that is not
   * allowed (a reader without write access), the old layout as it is: an image to look at.
   */
  private Optional<Image> migrateOrView(String name, Manifest legacy) {
    Path imagesDir = layout.imagesDir();
    try {
      locks.withStoreLock(() -> migrateLocked(name));
      return Optional.empty();
    } catch (WorkspaceException e) {
      // No write access (doctor as a normal user, a read-only mount): show it as it is.
      if (e.getCause() instanceof IOException) {
        if (!Files.isDirectory(imagesDir.resolve(name).resolve(ROOTFS), NOFOLLOW)) {
          throw damaged(name, imagesDir.resolve(name).resolve(ROOTFS) + " is missing", null);
        }
        return Optional.of(toImage(name, legacy));
      }
      throw e;
    }
  }

  /** Under the store lock: moves a format-1 image's rootfs to its layer, rewrites its manifest. */
  private Void migrateLocked(String name) throws IOException {
    Optional<Manifest> manifest = read(name);
    if (manifest.isEmpty() || manifest.get().formatVersion() != LEGACY_FORMAT_VERSION) {
      return null; // gone, or migrated by someone else meanwhile
    }
    Manifest old = manifest.get();
    String id = StoreLayout.legacyLayerId(name);
    Path imageDir = layout.imagesDir().resolve(name);
    Path rootfs = imageDir.resolve(ROOTFS);
    layout.ensureLayersDir();
    if (Files.isDirectory(rootfs, NOFOLLOW)) {
      if (Files.exists(layout.layerPath(id), NOFOLLOW)) {
        // Migrated before, then rebuilt by an older sandbox4j: this rootfs is another one.
        id =
            StoreLayout.sha256Hex(
                ("sandbox4j legacy rootfs of image\n" + name + "\n" + old.created())
                    .getBytes(StandardCharsets.UTF_8));
      }
      // Sandboxes running on it keep running: a mounted lower layer may be renamed.
      Files.move(rootfs, layout.layerPath(id), StandardCopyOption.ATOMIC_MOVE);
      AtomicFiles.syncDirectory(layout.layersDir());
      AtomicFiles.syncDirectory(imageDir);
    }
    Path layer = layout.layerPath(id);
    if (!Files.isDirectory(layer, NOFOLLOW)) {
      throw damaged(name, rootfs + " is missing", null);
    }
    Manifest migrated =
        new Manifest(
            FORMAT_VERSION,
            name,
            old.created(),
            old.sizeBytes(),
            old.description(),
            old.packages(),
            List.of(id),
            null,
            null);
    write(imageDir.resolve(MANIFEST), migrated);
    return null;
  }

  /** Under the store lock: {@link #migrateLocked}, except that a damaged image stays as it is. */
  void migrateQuietly(String name) throws IOException {
    try {
      migrateLocked(name);
    } catch (WorkspaceException damaged) {
      // replaced or removed anyway
    }
  }

  /** The layer ids image {@code name}'s manifest lists, or none if it is unreadable. */
  List<String> layerIdsOf(String name) {
    try {
      return read(name)
          .map(m -> m.formatVersion() == FORMAT_VERSION ? m.layers() : List.<String>of())
          .orElse(List.of());
    } catch (WorkspaceException damaged) {
      return List.of(); // its layers, if any, are gc's
    }
  }

  /** Every complete image, sorted by name. */
  List<Image> list() {
    List<Image> images = new ArrayList<>();
    for (String name : layout.imageNames()) {
      find(name).ifPresent(images::add);
    }
    return images;
  }

  /**
   * Under the store lock: every layer an image manifest lists. An unreadable manifest fails the
   * scan rather than leave its layers out.
   */
  Set<String> layersListed() throws IOException {
    Set<String> used = new HashSet<>();
    for (String name : layout.imageNames()) {
      Path manifestFile = layout.manifestFile(name);
      if (!Files.exists(manifestFile, NOFOLLOW)) {
        continue;
      }
      Manifest m = JSON.readValue(Files.readAllBytes(manifestFile), Manifest.class);
      if (m.formatVersion() == LEGACY_FORMAT_VERSION) {
        used.add(StoreLayout.legacyLayerId(name));
      } else if (m.layers() != null) {
        used.addAll(m.layers());
      }
    }
    return used;
  }

  static WorkspaceException damaged(String name, String why, Throwable cause) {
    return new WorkspaceException(
        "image "
            + name
            + " is damaged ("
            + why
            + "): rebuild it with `sandbox4j image build` or remove it with `sandbox4j image rm "
            + name
            + "`",
        cause);
  }
}
