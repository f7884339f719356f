package dev.sandbox4j.runtime.internal.image;

import static dev.sandbox4j.runtime.internal.image.ImageStore.DEFAULT;

import dev.sandbox4j.runtime.internal.image.ImageStore.Build;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * The store's image {@value ImageStore#DEFAULT}: one layer, built by a {@link RootfsBuilder}
 * (mmdebstrap unless a test says otherwise) with its ownership shifted to the canonical host ids
 * ({@link RootfsOwnership}), under a random layer id. Built at most once however many callers race
 * for it, across threads and JVMs (they wait on the name's lock).
 */
final class DefaultImage {
  private static final SecureRandom RANDOM = new SecureRandom();

  private final StoreLocks locks;
  private final Manifests manifests;
  private final Staging staging;
  private final RootfsBuilder builder;

  DefaultImage(StoreLocks locks, Manifests manifests, Staging staging, RootfsBuilder builder) {
    this.locks = locks;
    this.manifests = manifests;
    this.staging = staging;
    this.builder = builder;
  }

  /** See {@link ImageStore#ensureDefault}. */
  Image ensure(Consumer<String> progress) {
    Optional<Image> cached = manifests.find(DEFAULT);
    if (cached.isPresent()) {
      return cached.get();
    }
    return locks.withLock(
        DEFAULT,
        () -> {
          // Whoever held the lock before us may just have built it.
          Optional<Image> built = manifests.find(DEFAULT);
          return built.isPresent() ? built.get() : buildLocked(progress);
        });
  }

  /** See {@link ImageStore#buildDefault}. */
  Image build(Consumer<String> progress) {
    return locks.withLock(DEFAULT, () -> buildLocked(progress));
  }

  /** Builds under the name's lock (held by the caller); every failure is an ImageBuildException. */
  private Image buildLocked(Consumer<String> progress) {
    try {
      return staging.inStaging(DEFAULT, build -> buildIn(build, progress));
    } catch (IOException e) {
      throw new ImageBuildException("building image " + DEFAULT + " failed: " + e, e);
    }
  }

  private Image buildIn(Build build, Consumer<String> progress) throws IOException {
    Instant started = Instant.now();
    Path rootfs = Files.createDirectory(build.dir().resolve(StoreLayout.ROOTFS));
    builder.build(rootfs, progress);
    progress.accept(
        "shifting ownership to the sandboxes' host ids (container 0 = host "
            + Image.UID_SHIFT
            + ")");
    long size = RootfsOwnership.shiftToHost(rootfs);
    // Built from a moving archive, no two builds are alike: the id is random, never reused.
    byte[] nonce = new byte[32];
    RANDOM.nextBytes(nonce);
    String id = StoreLayout.sha256Hex(nonce);
    staging.addLayer(build, rootfs, id);
    Image image =
        staging.publish(
            build,
            DEFAULT,
            List.of(id),
            size,
            MmdebstrapBuilder.DESCRIPTION,
            MmdebstrapBuilder.PACKAGES,
            null,
            null);
    progress.accept(
        "image "
            + DEFAULT
            + " ready: "
            + size / (1024 * 1024)
            + " MiB, built in "
            + Duration.between(started, Instant.now()).toMillis() / 100 / 10.0
            + " s");
    return image;
  }
}
