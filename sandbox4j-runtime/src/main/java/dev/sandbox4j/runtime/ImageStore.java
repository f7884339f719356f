package dev.sandbox4j.runtime;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The images on this machine: {@code <imagesDir>/<name>/rootfs/} plus {@code image.json}.
 *
 * <p>An image appears under its name only when complete: it is built in {@code .build-<name>-<r>/}
 * and renamed into place, so a crash mid-build leaves a leftover that {@link #gc()} removes, never
 * a half image. Builders of one name exclude each other, across threads and JVMs, with a lock on
 * {@code .lock-<name>}; lock files are never deleted, since deleting a lock file someone waits on
 * would let a third party lock a new file of the same name.
 */
final class ImageStore {
  static final String DEFAULT = "default";
  static final int FORMAT_VERSION = 1;

  private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");
  private static final String BUILD_PREFIX = ".build-";
  private static final String OLD_PREFIX = ".old-";
  private static final String LOCK_PREFIX = ".lock-";
  private static final String MANIFEST = "image.json";
  private static final String ROOTFS = "rootfs";
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  /**
   * File locks belong to the process, not the thread: a second {@code FileChannel.lock()} on the
   * same file from this JVM throws instead of waiting. So threads queue here first, keyed by the
   * lock file's real path.
   */
  private static final ConcurrentHashMap<Path, ReentrantLock> JVM_LOCKS = new ConcurrentHashMap<>();

  /** What {@code image.json} holds; {@code created} as ISO-8601, which needs no Jackson module. */
  private record Manifest(
      int formatVersion,
      String name,
      String created,
      long sizeBytes,
      String description,
      List<String> packages) {}

  private final Path imagesDir;
  private final RootfsBuilder defaultBuilder;

  /** A store whose default image is built with mmdebstrap. No I/O until first use. */
  ImageStore(Path imagesDir) {
    this(imagesDir, MmdebstrapBuilder.fromEnvironment());
  }

  /** A store whose default image is built by {@code defaultBuilder}. */
  ImageStore(Path imagesDir, RootfsBuilder defaultBuilder) {
    this.imagesDir = imagesDir;
    this.defaultBuilder = defaultBuilder;
  }

  Path directory() {
    return imagesDir;
  }

  /** The complete image called {@code name}, if there is one. */
  Optional<Image> find(String name) {
    checkName(name);
    // A rebuild renames the old image away, then the new one in: a reader caught between the two
    // renames has read image.json but finds no rootfs. Look again before calling it damaged.
    for (int attempt = 1; ; attempt++) {
      Optional<Image> image = readManifest(name);
      if (image.isEmpty() || Files.isDirectory(image.get().rootfs(), NOFOLLOW)) {
        return image;
      }
      if (attempt == 3) {
        throw damaged(name, image.get().rootfs() + " is missing", null);
      }
    }
  }

  private Optional<Image> readManifest(String name) {
    Path imageDir = imagesDir.resolve(name);
    Path manifestFile = imageDir.resolve(MANIFEST);
    Manifest manifest;
    try {
      manifest = JSON.readValue(Files.readAllBytes(manifestFile), Manifest.class);
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw damaged(name, manifestFile + " is unreadable: " + e.getMessage(), e);
    }
    if (manifest.formatVersion() != FORMAT_VERSION) {
      throw damaged(
          name,
          manifestFile
              + " has format version "
              + manifest.formatVersion()
              + ", this sandbox4j reads "
              + FORMAT_VERSION,
          null);
    }
    Instant created;
    try {
      created = Instant.parse(manifest.created());
    } catch (DateTimeParseException | NullPointerException e) {
      throw damaged(name, manifestFile + " has no valid created time", e);
    }
    return Optional.of(
        new Image(
            name,
            imageDir.resolve(ROOTFS),
            created,
            manifest.sizeBytes(),
            manifest.description() == null ? "" : manifest.description()));
  }

  /** Every complete image, sorted by name. */
  List<Image> list() {
    if (!Files.isDirectory(imagesDir)) {
      return List.of();
    }
    List<String> names;
    try (Stream<Path> entries = Files.list(imagesDir)) {
      names =
          entries
              .map(p -> p.getFileName().toString())
              .filter(n -> NAME.matcher(n).matches())
              .sorted()
              .toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list images in " + imagesDir, e);
    }
    List<Image> images = new ArrayList<>();
    for (String name : names) {
      find(name).ifPresent(images::add);
    }
    return images;
  }

  /**
   * Removes the image called {@code name}; does nothing if there is none. The caller makes sure no
   * sandbox still uses it as a layer.
   */
  void remove(String name) {
    checkName(name);
    if (!Files.isDirectory(imagesDir)) {
      return;
    }
    withLock(
        name,
        () -> {
          Path image = imagesDir.resolve(name);
          if (!Files.exists(image, NOFOLLOW)) {
            return null;
          }
          // Rename first: the name is gone at once, and a crash mid-delete leaves only an .old-*.
          Path old = imagesDir.resolve(OLD_PREFIX + name + "-" + randomSuffix());
          Files.move(image, old, StandardCopyOption.ATOMIC_MOVE);
          AtomicFiles.syncDirectory(imagesDir);
          deleteTree(old);
          return null;
        });
  }

  /** The default image, built first if there is none yet (once, however many callers race). */
  Image ensureDefault(Consumer<String> progress) {
    Optional<Image> cached = find(DEFAULT);
    if (cached.isPresent()) {
      return cached.get();
    }
    return withLock(
        DEFAULT,
        () -> {
          // Whoever held the lock before us may just have built it.
          Optional<Image> built = find(DEFAULT);
          return built.isPresent() ? built.get() : build(DEFAULT, progress);
        });
  }

  /** Builds the default image anew and replaces the old one (if any) in one rename. */
  Image buildDefault(Consumer<String> progress) {
    return withLock(DEFAULT, () -> build(DEFAULT, progress));
  }

  /**
   * Deletes what interrupted builds and removals left ({@code .build-*}, {@code .old-*}), except
   * those of a name whose lock someone holds right now: that build is still running.
   */
  void gc() {
    for (Path leftover : leftovers()) {
      Optional<String> owner = ownerOf(leftover);
      if (owner.isEmpty()) {
        uncheckedDelete(leftover);
        continue;
      }
      tryWithLock(
          owner.get(),
          () -> {
            deleteTree(leftover);
            return null;
          });
    }
  }

  /** Builds under the name's lock (held by the caller); every failure is an ImageBuildException. */
  private Image build(String name, Consumer<String> progress) {
    try {
      return buildLocked(name, progress);
    } catch (IOException e) {
      throw new ImageBuildException("building image " + name + " failed: " + e, e);
    }
  }

  private Image buildLocked(String name, Consumer<String> progress) throws IOException {
    Instant started = Instant.now();
    // We hold the name's lock: any leftover of this name is from a build or removal that died.
    for (Path leftover : leftovers()) {
      if (ownerOf(leftover).filter(name::equals).isPresent()) {
        deleteTree(leftover);
      }
    }
    Path staging = imagesDir.resolve(BUILD_PREFIX + name + "-" + randomSuffix());
    Files.createDirectory(staging);
    try {
      Path rootfs = Files.createDirectory(staging.resolve(ROOTFS));
      defaultBuilder.build(rootfs, progress);
      progress.accept(
          "shifting ownership to the sandboxes' host ids (container 0 = host "
              + Image.UID_SHIFT
              + ")");
      long size = RootfsOwnership.shiftToHost(rootfs);
      Instant created = Instant.now();
      Manifest manifest =
          new Manifest(
              FORMAT_VERSION,
              name,
              created.toString(),
              size,
              MmdebstrapBuilder.DESCRIPTION,
              MmdebstrapBuilder.PACKAGES);
      AtomicFiles.write(staging.resolve(MANIFEST), JSON.writeValueAsBytes(manifest));
      // The rename below must not become durable before the files it publishes.
      HostCommand.check(List.of("sync", "--file-system", staging.toString()));
      publish(staging, imagesDir.resolve(name));
      progress.accept(
          "image "
              + name
              + " ready: "
              + size / (1024 * 1024)
              + " MiB, built in "
              + Duration.between(started, Instant.now()).toMillis() / 100 / 10.0
              + " s");
      return new Image(
          name,
          imagesDir.resolve(name).resolve(ROOTFS),
          created,
          size,
          MmdebstrapBuilder.DESCRIPTION);
    } catch (IOException | RuntimeException | Error e) {
      try {
        deleteTree(staging);
      } catch (IOException | RuntimeException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw e;
    }
  }

  /** Puts a complete build under its name: old image renamed away, new one renamed in. */
  private void publish(Path staging, Path target) throws IOException {
    Path old = null;
    if (Files.exists(target, NOFOLLOW)) {
      old = imagesDir.resolve(OLD_PREFIX + target.getFileName() + "-" + randomSuffix());
      Files.move(target, old, StandardCopyOption.ATOMIC_MOVE);
    }
    Files.move(staging, target, StandardCopyOption.ATOMIC_MOVE);
    AtomicFiles.syncDirectory(imagesDir);
    if (old != null) {
      deleteTree(old);
    }
  }

  private List<Path> leftovers() {
    if (!Files.isDirectory(imagesDir)) {
      return List.of();
    }
    try (Stream<Path> entries = Files.list(imagesDir)) {
      return entries
          .filter(
              p -> {
                String n = p.getFileName().toString();
                return n.startsWith(BUILD_PREFIX) || n.startsWith(OLD_PREFIX);
              })
          .toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list " + imagesDir, e);
    }
  }

  /** The image name in {@code .build-<name>-<hex>} or {@code .old-<name>-<hex>}. */
  private static Optional<String> ownerOf(Path leftover) {
    String n = leftover.getFileName().toString();
    String rest = n.substring((n.startsWith(BUILD_PREFIX) ? BUILD_PREFIX : OLD_PREFIX).length());
    int dash = rest.lastIndexOf('-');
    if (dash < 0) {
      return Optional.empty();
    }
    String name = rest.substring(0, dash);
    return NAME.matcher(name).matches() ? Optional.of(name) : Optional.empty();
  }

  private interface LockedAction<T> {
    T run() throws IOException;
  }

  private <T> T withLock(String name, LockedAction<T> action) {
    Path lockFile = lockFile(name);
    ReentrantLock jvmLock = JVM_LOCKS.computeIfAbsent(lockFile, k -> new ReentrantLock());
    jvmLock.lock();
    try (FileChannel channel = openLock(lockFile)) {
      channel.lock(); // released when the channel closes
      return action.run();
    } catch (IOException e) {
      throw new WorkspaceException("image " + name + ": " + e.getMessage(), e);
    } finally {
      jvmLock.unlock();
    }
  }

  /** Runs {@code action} under the name's lock if nobody holds it; otherwise does nothing. */
  private void tryWithLock(String name, LockedAction<?> action) {
    Path lockFile = lockFile(name);
    ReentrantLock jvmLock = JVM_LOCKS.computeIfAbsent(lockFile, k -> new ReentrantLock());
    if (!jvmLock.tryLock()) {
      return;
    }
    try (FileChannel channel = openLock(lockFile)) {
      if (channel.tryLock() != null) {
        action.run();
      }
    } catch (IOException e) {
      throw new WorkspaceException("image " + name + ": " + e.getMessage(), e);
    } finally {
      jvmLock.unlock();
    }
  }

  private Path lockFile(String name) {
    try {
      Files.createDirectories(imagesDir);
      // The real path: two stores reaching one directory by different paths share JVM locks.
      return imagesDir.toRealPath().resolve(LOCK_PREFIX + name);
    } catch (IOException e) {
      throw new WorkspaceException("cannot create " + imagesDir, e);
    }
  }

  private static FileChannel openLock(Path lockFile) throws IOException {
    return FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
  }

  private static void uncheckedDelete(Path tree) {
    try {
      deleteTree(tree);
    } catch (IOException e) {
      throw new WorkspaceException("cannot delete " + tree, e);
    }
  }

  /**
   * Deletes a tree without following symlinks, and refuses to cross into another file system: if a
   * dying mmdebstrap left /proc or /dev mounted inside a build, deleting through the mount would
   * reach the host's.
   */
  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root, NOFOLLOW)) {
      return;
    }
    Object rootDevice = Files.getAttribute(root, "unix:dev", NOFOLLOW);
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            if (!rootDevice.equals(Files.getAttribute(dir, "unix:dev", NOFOLLOW))) {
              throw new IOException(
                  "a file system is mounted at " + dir + ": unmount it, then run gc again");
            }
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            Files.delete(file);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult postVisitDirectory(Path dir, IOException e) throws IOException {
            if (e != null) {
              throw e;
            }
            Files.delete(dir);
            return FileVisitResult.CONTINUE;
          }
        });
  }

  private static String randomSuffix() {
    return HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong());
  }

  private static void checkName(String name) {
    if (name == null || !NAME.matcher(name).matches()) {
      throw new WorkspaceException(
          "invalid image name "
              + (name == null ? "null" : "\"" + name + "\"")
              + ": use 1 to 63 characters from a-z, 0-9, '.', '_' and '-', starting with a"
              + " letter or digit");
    }
  }

  private static WorkspaceException damaged(String name, String why, Throwable cause) {
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
