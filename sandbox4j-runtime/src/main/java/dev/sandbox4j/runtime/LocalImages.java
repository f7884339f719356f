package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageConfig;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.image.PullLimit;
import dev.sandbox4j.runtime.internal.image.PullRefusedException;
import dev.sandbox4j.runtime.internal.registry.ImageReference;
import dev.sandbox4j.runtime.internal.registry.RegistryClient;
import dev.sandbox4j.runtime.internal.registry.RegistryCredentials;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * The images and snapshots of one state directory, as {@link LocalSandbox} manages them: list,
 * build the default, save a sandbox as a snapshot, remove. {@link LocalSandbox} documents each.
 */
final class LocalImages {
  private final ImageStore images;
  private final Consumer<String> progress;
  private final RegistryCredentials credentials;
  private final Set<String> plainHttpRegistries;
  private final long maxImageSize;
  private final LongSupplier diskReserve;

  LocalImages(
      ImageStore images,
      Consumer<String> progress,
      RegistryCredentials credentials,
      Set<String> plainHttpRegistries,
      long maxImageSize,
      LongSupplier diskReserve) {
    this.images = images;
    this.progress = progress;
    this.credentials = credentials;
    this.plainHttpRegistries = Set.copyOf(plainHttpRegistries);
    this.maxImageSize = maxImageSize;
    this.diskReserve = diskReserve;
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

  /** Pulls {@code reference} (see {@link LocalSandbox#pullImage}). */
  ImageInfo pull(String reference) {
    ImageReference ref = ImageReference.parse(reference);
    LocalRefs.requireLinuxAndRoot();
    return ImageInfo.of(pullWithinLimits(ref));
  }

  /** Pulls {@code ref} within the builder's size limit and the disk's reserve. */
  private Image pullWithinLimits(ImageReference ref) {
    try {
      return images.pull(
          ref, client(), progress, new PullLimit(maxImageSize, diskReserve.getAsLong()));
    } catch (PullRefusedException e) {
      throw e.overLimit()
          ? new ImageTooLargeException(e.getMessage(), e.bytes(), e.bound())
          : new InsufficientDiskException(e.getMessage(), e.bytes(), e.bound());
    }
  }

  /** Pushes image {@code name} to {@code reference} (see {@link LocalSandbox#pushImage}). */
  String push(String name, String reference) {
    ImageReference ref = ImageReference.parse(reference);
    String local = ImageReference.looksLikeReference(name) ? pulledName(name) : name;
    LocalRefs.checkImageName(local, "image name");
    LocalRefs.requireLinuxAndRoot();
    String digest = images.push(local, ref, client(), ownImagesConfig(), progress);
    return ref.withDigest(digest).toString();
  }

  /**
   * How the engine runs an image of Sandbox4j's own, which has no config of its own: what a pushed
   * one says, so that it runs the same way wherever it is pulled.
   */
  private static ImageConfig ownImagesConfig() {
    List<String> env =
        Stream.of("PATH", "HOME", "USER", "LANG")
            .map(n -> n + "=" + Engine.BASE_ENV.get(n))
            .toList();
    return new ImageConfig(Engine.USER, Engine.HOME, env, List.of(), List.of());
  }

  private static String pulledName(String reference) {
    return ImageStore.pulledName(ImageReference.parse(reference));
  }

  /**
   * The store's name for image {@code image} of a builder: {@code default}, a local image's name,
   * or a registry reference, pulled first if this machine does not have it.
   *
   * @throws IllegalArgumentException if it is neither a valid name nor a valid reference
   */
  String localName(String image) {
    if (image.equals(ImageStore.DEFAULT)) {
      return image;
    }
    boolean reference = ImageReference.looksLikeReference(image);
    if (!reference && LocalRefs.isImageName(image) && images.find(image).isPresent()) {
      return image;
    }
    ImageReference ref = ImageReference.parse(image);
    String name = ImageStore.pulledName(ref);
    if (images.find(name).isPresent()) {
      return name;
    }
    try {
      return pullWithinLimits(ref).name();
    } catch (WorkspaceException e) {
      if (reference
          || e instanceof ImageTooLargeException
          || e instanceof InsufficientDiskException) {
        throw e;
      }
      throw new WorkspaceException(
          "image '"
              + image
              + "' does not exist here (see `sandbox4j image ls`), and pulling "
              + ref
              + " failed: "
              + e.getMessage(),
          e);
    }
  }

  private RegistryClient client() {
    return new RegistryClient(credentials, plainHttpRegistries);
  }

  ImageInfo buildDefault(boolean rebuild) {
    LocalRefs.requireLinuxAndRoot();
    return ImageInfo.of(rebuild ? images.buildDefault(progress) : images.ensureDefault(progress));
  }

  /** Removes image {@code nameOrReference}: a local name, or the reference it was pulled as. */
  boolean removeImage(String nameOrReference) {
    LocalRefs.requireLinuxAndRoot();
    String name =
        ImageReference.looksLikeReference(nameOrReference)
            ? pulledName(nameOrReference)
            : nameOrReference;
    if (images.find(name).isEmpty()) {
      return false;
    }
    images.remove(name);
    return true;
  }
}
