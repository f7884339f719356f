package dev.sandbox4j.runtime.internal.image;

import static dev.sandbox4j.runtime.internal.image.StoreLayout.BUILD_PREFIX;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.NOFOLLOW;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.PINS;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.TRASH_PREFIX;

import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * Deletes what nobody uses in one image store: leftovers of interrupted builds and removals, and
 * layers that no image manifest lists, no build in progress pinned and no sandbox runs on ({@link
 * ImageStore.LayerUsers}). Decides under the store lock and deletes after releasing it, so the lock
 * is held for renames only.
 */
final class StoreGc {
  private final StoreLayout layout;
  private final StoreLocks locks;
  private final Manifests manifests;
  private final ImageStore.LayerUsers sandboxes;

  StoreGc(
      StoreLayout layout, StoreLocks locks, Manifests manifests, ImageStore.LayerUsers sandboxes) {
    this.layout = layout;
    this.locks = locks;
    this.manifests = manifests;
    this.sandboxes = sandboxes;
  }

  /** See {@link ImageStore#gc()}. */
  List<String> gc() {
    List<String> removed = new ArrayList<>();
    for (Path leftover : layout.leftovers()) {
      Optional<String> owner = StoreLayout.ownerOf(leftover);
      if (owner.isEmpty()) {
        uncheckedDelete(leftover);
        removed.add("leftover of an interrupted image build " + leftover.getFileName());
        continue;
      }
      locks.tryWithLock(
          owner.get(),
          () -> {
            Trees.delete(leftover);
            removed.add("leftover of an interrupted image build of " + owner.get());
            return null;
          });
    }
    try {
      removed.addAll(RegistryPull.removeAbandonedDownloads(layout.imagesDir()));
    } catch (IOException e) {
      throw new WorkspaceException("cannot clean " + layout.imagesDir() + ": " + e, e);
    }
    if (!Files.isDirectory(layout.layersDir(), NOFOLLOW)) {
      return removed;
    }
    List<Path> trash = new ArrayList<>(layout.trashLeftovers());
    List<Path> unused;
    try {
      unused = locks.withStoreLock(() -> trashUnused(layout.allLayerIds()));
    } catch (WorkspaceException e) {
      // which layers are in use cannot be told (a record this version cannot read, say): keep
      // them all, and let the rest of gc go on
      System.getLogger(ImageStore.class.getName())
          .log(
              System.Logger.Level.WARNING,
              "gc kept every image layer: cannot tell which are in use (" + e.getMessage() + ")");
      unused = List.of();
    }
    trash.addAll(unused);
    for (Path p : trash) {
      uncheckedDelete(p);
    }
    for (Path p : unused) {
      String n = p.getFileName().toString().substring(TRASH_PREFIX.length());
      removed.add("unused image layer " + n.substring(0, Math.min(12, n.length())));
    }
    return removed;
  }

  /**
   * Under the store lock: renames each of {@code candidates} that nothing uses to {@code
   * layers/.trash-<id>-<r>} (gone from the store at once) and returns those, for the caller to
   * delete after releasing the lock.
   */
  List<Path> trashUnused(List<String> candidates) throws IOException {
    if (candidates.isEmpty()) {
      return List.of();
    }
    Set<String> used = layersInUse();
    List<Path> trash = new ArrayList<>();
    for (String id : new LinkedHashSet<>(candidates)) {
      Path layer = layout.layerPath(id);
      if (used.contains(id) || !Files.exists(layer, NOFOLLOW)) {
        continue;
      }
      Path renamed =
          layout.layersDir().resolve(TRASH_PREFIX + id + "-" + StoreLayout.randomSuffix());
      Files.move(layer, renamed, StandardCopyOption.ATOMIC_MOVE);
      trash.add(renamed);
    }
    if (!trash.isEmpty()) {
      AtomicFiles.syncDirectory(layout.layersDir());
    }
    return trash;
  }

  /**
   * Under the store lock: every layer an image manifest lists, a build pinned, or a sandbox runs on
   * ({@link ImageStore.LayerUsers}). Anything unreadable fails the scan (nothing is deleted then)
   * rather than risk deleting a layer in use.
   */
  private Set<String> layersInUse() throws IOException {
    Set<String> used = manifests.layersListed();
    for (Path build : layout.leftovers()) {
      Path pins = build.resolve(PINS);
      if (build.getFileName().toString().startsWith(BUILD_PREFIX) && Files.exists(pins, NOFOLLOW)) {
        Files.readAllLines(pins).stream()
            .map(String::strip)
            .filter(s -> !s.isEmpty())
            .forEach(used::add);
      }
    }
    used.addAll(sandboxes.layers());
    return used;
  }

  static void uncheckedDelete(Path tree) {
    try {
      Trees.delete(tree);
    } catch (IOException e) {
      throw new WorkspaceException("cannot delete " + tree, e);
    }
  }
}
