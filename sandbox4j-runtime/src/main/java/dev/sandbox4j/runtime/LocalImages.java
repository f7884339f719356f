package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The images and snapshots of one state directory, as {@link LocalSandbox} manages them: list,
 * build the default, save a sandbox as a snapshot, remove. {@link LocalSandbox} documents each.
 */
final class LocalImages {
  private final ImageStore images;
  private final Consumer<String> progress;

  LocalImages(ImageStore images, Consumer<String> progress) {
    this.images = images;
    this.progress = progress;
  }

  ImageStore store() {
    return images;
  }

  /** The name is checked before the engine is opened, as by every operation. */
  SnapshotInfo snapshot(Supplier<Engine> engine, WorkspaceRef ref, String name) {
    LocalRefs.checkImageName(name, "snapshot name");
    Image image = new Lifecycle(engine.get()).snapshot(LocalRefs.localId(ref), name);
    return LocalInfos.snapshotInfo(image, images.snapshotOf(name).orElseThrow());
  }

  List<SnapshotInfo> snapshots() {
    return images.list().stream()
        .flatMap(i -> images.snapshotOf(i.name()).map(s -> LocalInfos.snapshotInfo(i, s)).stream())
        .toList();
  }

  boolean removeSnapshot(String name) {
    LocalRefs.checkImageName(name, "snapshot name");
    LocalRefs.requireLinuxAndRoot();
    if (images.find(name).isEmpty()) {
      return false;
    }
    if (images.snapshotOf(name).isEmpty()) {
      throw new IllegalArgumentException(
          "image '" + name + "' is not a snapshot: remove it as an image");
    }
    images.remove(name);
    return true;
  }

  List<ImageInfo> images() {
    return images.list().stream().map(ImageInfo::of).toList();
  }

  ImageInfo buildDefault(boolean rebuild) {
    LocalRefs.requireLinuxAndRoot();
    return ImageInfo.of(rebuild ? images.buildDefault(progress) : images.ensureDefault(progress));
  }

  boolean removeImage(String name) {
    LocalRefs.requireLinuxAndRoot();
    if (images.find(name).isEmpty()) {
      return false;
    }
    images.remove(name);
    return true;
  }
}
