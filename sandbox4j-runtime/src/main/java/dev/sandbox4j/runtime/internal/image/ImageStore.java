package dev.sandbox4j.runtime.internal.image;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The images on this machine: read-only layers shared by content id, and names for stacks of them.
 *
 * <p>Layout of {@code <imagesDir>/}:
 *
 * <ul>
 *   <li>{@code layers/<id>/}: one layer (see {@link Image}), named by a sha256 hex id: for an
 *       imported layer the hash of its archive bytes, for a recipe step its cache key (which hashes
 *       the step and everything below it), for a default image built by mmdebstrap a random one (no
 *       two builds are alike). A layer directory is complete when it appears, and never changes
 *       after. {@code layers/} is mode 0700: layers hold setuid files and whatever an imported
 *       archive brought, which no host user needs to reach.
 *   <li>{@code <name>/image.json}: the manifest, {@value #FORMAT_VERSION}: its layer ids bottom
 *       first, created, size, description. Format 1 (before layers) had {@code <name>/rootfs/}; the
 *       first {@link #find} of such an image moves that directory to {@code
 *       layers/<legacyLayerId(name)>} and rewrites the manifest, without copying a byte.
 * </ul>
 *
 * <p>An image appears under its name only when complete: it is built in {@code .build-<name>-<r>/}
 * and its manifest renamed into place, so a crash mid-build leaves a leftover that {@link #gc()}
 * removes, never a half image. Builders of one name exclude each other, across threads and JVMs,
 * with a lock on {@code .lock-<name>}; lock files are never deleted, since deleting a lock file
 * someone waits on would let a third party lock a new file of the same name.
 *
 * <p><b>Layers are deleted only when nothing uses them.</b> Under the store lock ({@code .lock}) a
 * layer is in use while an image manifest lists it, a sandbox record ({@code
 * ../sandboxes/<id>/state.json}) names it, or a build in progress pinned it ({@code .build-*}{@code
 * /pins}). A sandbox writes its record under the same lock before it mounts the layers, so removing
 * or rebuilding an image leaves running sandboxes their layers; {@link #remove} and rebuilds delete
 * the old image's layers nobody else uses, {@link #gc()} every unused one. Lock order: a name's
 * lock, then a sandbox's lock, then the store lock.
 */
public final class ImageStore {
  public static final String DEFAULT = "default";
  static final int FORMAT_VERSION = 2;
  private static final int LEGACY_FORMAT_VERSION = 1;

  private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");
  private static final Pattern LAYER_ID = Pattern.compile("[0-9a-f]{64}");
  private static final String BUILD_PREFIX = ".build-";
  private static final String OLD_PREFIX = ".old-";
  private static final String LOCK_PREFIX = ".lock-";
  private static final String STORE_LOCK = ".lock";
  private static final String TRASH_PREFIX = ".trash-";
  private static final String MANIFEST = "image.json";
  private static final String ROOTFS = "rootfs";
  private static final String LAYERS = "layers";
  private static final String PINS = "pins";
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final SecureRandom RANDOM = new SecureRandom();

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

  /** The store locks this thread holds (by real path), so that holding one again is a no-op. */
  private static final ThreadLocal<Set<Path>> HELD_STORE_LOCKS =
      ThreadLocal.withInitial(HashSet::new);

  /**
   * What {@code image.json} holds; {@code created} as ISO-8601, which needs no Jackson module.
   * {@code layers} bottom first; null in format 1. {@code snapshot} is null unless the image is a
   * sandbox's snapshot.
   */
  private record Manifest(
      int formatVersion,
      String name,
      String created,
      long sizeBytes,
      String description,
      List<String> packages,
      List<String> layers,
      Snapshot snapshot) {}

  /**
   * What an image saved from a sandbox ({@link Lifecycle#snapshot}) remembers of it: the sandbox,
   * its image, the size every sandbox made from the snapshot keeps, and the named networks it was
   * on, which every sandbox made from the snapshot joins (null in snapshots saved before networks).
   */
  public record Snapshot(
      String sandbox,
      String image,
      int cpus,
      long memoryBytes,
      int pids,
      List<String> networks,
      long diskBytes,
      long diskInodes) {
    public Snapshot {
      networks = networks == null ? List.of() : List.copyOf(networks);
    }
  }

  private final Path imagesDir;
  private final Path layersDir;
  private final LayerUsers sandboxes;
  private final RootfsBuilder defaultBuilder;

  /**
   * Who else runs on the store's layers: the engine's sandboxes. Read under the store lock whenever
   * layers may be deleted (a gc, a removal), so that a layer a sandbox runs on is never one of
   * them; a sandbox records its layers under that lock before it mounts them.
   */
  @FunctionalInterface
  public interface LayerUsers {
    /** Nobody: no sandbox runs on this store's layers (a store of its own, as in a test). */
    LayerUsers NONE = Set::of;

    /**
     * Not known: the store was opened to read or build, without the sandboxes that may run on its
     * layers, so it deletes none (a gc or removal fails, and deletes nothing).
     */
    LayerUsers UNKNOWN =
        () -> {
          throw new IOException(
              "this image store was opened without the sandboxes that use its layers (to read or"
                  + " build): it deletes no layer");
        };

    /** Every layer some sandbox runs on. Fails rather than leave one out. */
    Set<String> layers() throws IOException;
  }

  /**
   * A store whose default image is built with mmdebstrap, to read or build: it knows no sandboxes
   * ({@link LayerUsers#UNKNOWN}), so it deletes no layer. No I/O until first use.
   */
  public ImageStore(Path imagesDir) {
    this(imagesDir, LayerUsers.UNKNOWN);
  }

  /** A store whose default image is built with mmdebstrap; {@code sandboxes} use its layers. */
  public ImageStore(Path imagesDir, LayerUsers sandboxes) {
    this(imagesDir, MmdebstrapBuilder.fromEnvironment(), sandboxes);
  }

  /** A store whose default image is built by {@code defaultBuilder}, to read or build. */
  public ImageStore(Path imagesDir, RootfsBuilder defaultBuilder) {
    this(imagesDir, defaultBuilder, LayerUsers.UNKNOWN);
  }

  /** A store whose default image is built by {@code defaultBuilder}; {@code sandboxes} use it. */
  public ImageStore(Path imagesDir, RootfsBuilder defaultBuilder, LayerUsers sandboxes) {
    this.imagesDir = imagesDir;
    this.layersDir = imagesDir.resolve(LAYERS);
    this.sandboxes = sandboxes;
    this.defaultBuilder = defaultBuilder;
  }

  Path directory() {
    return imagesDir;
  }

  /** Where layer {@code id} lives (whether or not it exists). */
  public Path layerPath(String id) {
    if (id == null || !LAYER_ID.matcher(id).matches()) {
      throw new IllegalArgumentException("malformed layer id: " + id);
    }
    return layersDir.resolve(id);
  }

  /** The layer that format-1 image {@code name}'s root filesystem becomes. */
  static String legacyLayerId(String name) {
    return sha256Hex(
        ("sandbox4j legacy rootfs of image\n" + name).getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The layers a sandbox runs on, bottom first: those its record names, or, for a record from
   * before layers ({@code layers} null), its legacy image's one.
   */
  public static List<String> layersOf(String image, List<String> layers) {
    return layers != null ? layers : List.of(legacyLayerId(image == null ? DEFAULT : image));
  }

  /** An unnamed stack of existing layers (a recipe step's sandbox), called {@code name}. */
  public Image ofLayers(String name, List<String> layerIds) {
    return new Image(
        name, layerIds, layerIds.stream().map(this::layerPath).toList(), Instant.now(), 0, "");
  }

  // ---- reading ----------------------------------------------------------------------------

  /** The complete image called {@code name}, if there is one. */
  public Optional<Image> find(String name) {
    checkName(name);
    // A rebuild renames the old manifest away, then the new one in, then deletes the old layers no
    // one uses: a reader caught between may find a layer gone. Look again before calling it
    // damaged.
    for (int attempt = 1; ; attempt++) {
      Optional<Manifest> manifest = readManifest(name);
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

  private Optional<Manifest> readManifest(String name) {
    Path manifestFile = imagesDir.resolve(name).resolve(MANIFEST);
    Manifest manifest;
    try {
      manifest = JSON.readValue(Files.readAllBytes(manifestFile), Manifest.class);
    } catch (NoSuchFileException e) {
      return Optional.empty();
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
                .allMatch(id -> id != null && LAYER_ID.matcher(id).matches()))) {
      throw damaged(name, manifestFile + " lists no valid layers", null);
    }
    return Optional.of(manifest);
  }

  private Image toImage(String name, Manifest manifest) {
    Instant created;
    try {
      created = Instant.parse(manifest.created());
    } catch (DateTimeParseException | NullPointerException e) {
      throw damaged(
          name, imagesDir.resolve(name).resolve(MANIFEST) + " has no valid created time", e);
    }
    List<String> ids =
        manifest.formatVersion() == LEGACY_FORMAT_VERSION
            ? List.of(legacyLayerId(name))
            : manifest.layers();
    List<Path> paths =
        manifest.formatVersion() == LEGACY_FORMAT_VERSION
            ? List.of(imagesDir.resolve(name).resolve(ROOTFS))
            : ids.stream().map(this::layerPath).toList();
    return new Image(
        name,
        ids,
        paths,
        created,
        manifest.sizeBytes(),
        manifest.description() == null ? "" : manifest.description());
  }

  /**
   * Turns format-1 image {@code name} into a one-layer image; empty once done. Where that is not
   * allowed (a reader without write access), the old layout as it is: an image to look at.
   */
  private Optional<Image> migrateOrView(String name, Manifest legacy) {
    try {
      withStoreLock(() -> migrateLocked(name));
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
    Optional<Manifest> manifest = readManifest(name);
    if (manifest.isEmpty() || manifest.get().formatVersion() != LEGACY_FORMAT_VERSION) {
      return null; // gone, or migrated by someone else meanwhile
    }
    Manifest old = manifest.get();
    String id = legacyLayerId(name);
    Path imageDir = imagesDir.resolve(name);
    Path rootfs = imageDir.resolve(ROOTFS);
    ensureLayersDir();
    if (Files.isDirectory(rootfs, NOFOLLOW)) {
      if (Files.exists(layerPath(id), NOFOLLOW)) {
        // Migrated before, then rebuilt by an older sandbox4j: this rootfs is another one.
        id =
            sha256Hex(
                ("sandbox4j legacy rootfs of image\n" + name + "\n" + old.created())
                    .getBytes(StandardCharsets.UTF_8));
      }
      // Sandboxes running on it keep running: a mounted lower layer may be renamed.
      Files.move(rootfs, layerPath(id), StandardCopyOption.ATOMIC_MOVE);
      AtomicFiles.syncDirectory(layersDir);
      AtomicFiles.syncDirectory(imageDir);
    }
    Path layer = layerPath(id);
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
            null);
    AtomicFiles.write(imageDir.resolve(MANIFEST), JSON.writeValueAsBytes(migrated));
    return null;
  }

  /** Under the store lock: {@link #migrateLocked}, except that a damaged image stays as it is. */
  private void migrateQuietly(String name) throws IOException {
    try {
      migrateLocked(name);
    } catch (WorkspaceException damaged) {
      // replaced or removed anyway
    }
  }

  /** What image {@code name} remembers of the sandbox it was saved from; empty if none. */
  public Optional<Snapshot> snapshotOf(String name) {
    checkName(name);
    return readManifest(name).map(Manifest::snapshot);
  }

  /** Every complete image, sorted by name. */
  public List<Image> list() {
    List<Image> images = new ArrayList<>();
    for (String name : imageNames()) {
      find(name).ifPresent(images::add);
    }
    return images;
  }

  private List<String> imageNames() {
    if (!Files.isDirectory(imagesDir)) {
      return List.of();
    }
    try (Stream<Path> entries = Files.list(imagesDir)) {
      return entries
          .map(p -> p.getFileName().toString())
          .filter(n -> NAME.matcher(n).matches() && !n.equals(LAYERS))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list images in " + imagesDir, e);
    }
  }

  // ---- removing ---------------------------------------------------------------------------

  /**
   * Removes the image called {@code name}; does nothing if there is none. Its layers that no other
   * image, sandbox or build uses are deleted; sandboxes created from it keep running on theirs.
   */
  public void remove(String name) {
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
          List<Path> trash =
              withStoreLock(
                  () -> {
                    migrateQuietly(name); // a format-1 rootfs may be a running sandbox's layer
                    List<String> layers = layerIdsOf(name);
                    // Rename first: the name is gone at once; a crash mid-delete leaves an .old-*.
                    Path old = imagesDir.resolve(OLD_PREFIX + name + "-" + randomSuffix());
                    Files.move(image, old, StandardCopyOption.ATOMIC_MOVE);
                    AtomicFiles.syncDirectory(imagesDir);
                    List<Path> unused = new ArrayList<>(trashUnused(layers));
                    unused.add(old);
                    return unused;
                  });
          for (Path p : trash) {
            Trees.delete(p);
          }
          return null;
        });
  }

  /** The layer ids image {@code name}'s manifest lists, or none if it is unreadable. */
  private List<String> layerIdsOf(String name) {
    try {
      return readManifest(name)
          .map(m -> m.formatVersion() == FORMAT_VERSION ? m.layers() : List.<String>of())
          .orElse(List.of());
    } catch (WorkspaceException damaged) {
      return List.of(); // its layers, if any, are gc's
    }
  }

  // ---- the default image -------------------------------------------------------------------

  /** The default image, built first if there is none yet (once, however many callers race). */
  public Image ensureDefault(Consumer<String> progress) {
    Optional<Image> cached = find(DEFAULT);
    if (cached.isPresent()) {
      return cached.get();
    }
    return withLock(
        DEFAULT,
        () -> {
          // Whoever held the lock before us may just have built it.
          Optional<Image> built = find(DEFAULT);
          return built.isPresent() ? built.get() : buildDefaultLocked(progress);
        });
  }

  /** Builds the default image anew and replaces the old one (if any) in one rename. */
  public Image buildDefault(Consumer<String> progress) {
    return withLock(DEFAULT, () -> buildDefaultLocked(progress));
  }

  /** Builds under the name's lock (held by the caller); every failure is an ImageBuildException. */
  private Image buildDefaultLocked(Consumer<String> progress) {
    try {
      return inStaging(DEFAULT, build -> buildDefaultIn(build, progress));
    } catch (IOException e) {
      throw new ImageBuildException("building image " + DEFAULT + " failed: " + e, e);
    }
  }

  private Image buildDefaultIn(Build build, Consumer<String> progress) throws IOException {
    Instant started = Instant.now();
    Path rootfs = Files.createDirectory(build.dir().resolve(ROOTFS));
    defaultBuilder.build(rootfs, progress);
    progress.accept(
        "shifting ownership to the sandboxes' host ids (container 0 = host "
            + Image.UID_SHIFT
            + ")");
    long size = RootfsOwnership.shiftToHost(rootfs);
    // Built from a moving archive, no two builds are alike: the id is random, never reused.
    byte[] nonce = new byte[32];
    RANDOM.nextBytes(nonce);
    String id = sha256Hex(nonce);
    addLayer(build, rootfs, id);
    Image image =
        publish(
            build,
            DEFAULT,
            List.of(id),
            size,
            MmdebstrapBuilder.DESCRIPTION,
            MmdebstrapBuilder.PACKAGES);
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

  // ---- importing ---------------------------------------------------------------------------

  /**
   * Imports {@code archive} as image {@code name}, replacing an image of that name: a root
   * filesystem tarball (plain, gzip, xz or zstd) becomes one layer, a {@code docker save} archive
   * or an OCI image layout archive one layer per image layer (see {@link ImageArchive}). Layers
   * already in the store (same archive bytes) are reused.
   *
   * @throws ImageBuildException if the archive is unreadable, unsafe or unsupported
   */
  public Image importArchive(String name, Path archive, Consumer<String> progress) {
    checkName(name);
    if (!Files.isRegularFile(archive)) {
      throw new ImageBuildException("cannot import " + archive + ": not a readable file");
    }
    return withLock(
        name,
        () -> {
          try {
            return inStaging(
                name,
                build -> {
                  ImageArchive.Imported imported =
                      ImageArchive.importLayers(this, build, archive, progress);
                  Image image =
                      publish(
                          build,
                          name,
                          imported.layerIds(),
                          imported.sizeBytes(),
                          imported.description(),
                          List.of());
                  progress.accept(
                      "image "
                          + name
                          + " imported: "
                          + imported.layerIds().size()
                          + " layer(s), "
                          + imported.sizeBytes() / (1024 * 1024)
                          + " MiB");
                  return image;
                });
          } catch (IOException e) {
            throw new ImageBuildException("importing " + archive + " failed: " + e, e);
          }
        });
  }

  // ---- builds: staging, pinning and publishing (for the default build, imports, recipes) -----

  /**
   * A build in progress: its staging directory {@code .build-<name>-<r>/} (mode 0700; the build's
   * scratch space, deleted when it ends) and the layers it pinned there ({@code pins}).
   */
  public static final class Build {
    private final Path dir;
    private final Set<String> pins = new LinkedHashSet<>();
    private int scratch;

    private Build(Path dir) {
      this.dir = dir;
    }

    public Path dir() {
      return dir;
    }

    /** A new empty directory in the staging area, for one layer being made. */
    Path newScratchDirectory() throws IOException {
      return Files.createDirectory(dir.resolve("scratch-" + ++scratch));
    }
  }

  /** What to do in a staging area. */
  public interface BuildAction<T> {
    T run(Build build) throws IOException;
  }

  /**
   * Runs {@code action} in a fresh staging area for {@code name} and deletes the area afterwards,
   * whatever happened. The caller holds {@code name}'s lock.
   */
  <T> T inStaging(String name, BuildAction<T> action) throws IOException {
    // We hold the name's lock: any leftover of this name is from a build or removal that died.
    for (Path leftover : leftovers()) {
      if (ownerOf(leftover).filter(name::equals).isPresent()) {
        Trees.delete(leftover);
      }
    }
    PrivateFiles.createPrivateDirectories(imagesDir);
    Path staging = imagesDir.resolve(BUILD_PREFIX + name + "-" + randomSuffix());
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

  /** Runs {@code action} holding image {@code name}'s build lock (see the class comment). */
  public <T> T withNameLock(String name, BuildAction<T> action) {
    checkName(name);
    return withLock(name, () -> inStaging(name, action));
  }

  /**
   * Pins the layers of {@code image} for {@code build}, failing if one is gone (the image was
   * rebuilt or removed since it was looked up).
   */
  public void pin(Build build, Image image) {
    withStoreLock(
        () -> {
          for (String id : image.layerIds()) {
            if (!Files.isDirectory(layerPath(id), NOFOLLOW)) {
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

  /** Pins layer {@code id} for {@code build} if the store has it; whether it has. */
  public boolean pinIfPresent(Build build, String id) {
    return withStoreLock(
        () -> {
          if (!Files.isDirectory(layerPath(id), NOFOLLOW)) {
            return false;
          }
          build.pins.add(id);
          writePins(build);
          return true;
        });
  }

  /**
   * Makes the complete directory {@code dir} (in {@code build}'s staging area) layer {@code id},
   * pinned for {@code build}. If the store has that layer already (made meanwhile by someone else),
   * {@code dir} is discarded and the existing one kept.
   */
  public void addLayer(Build build, Path dir, String id) throws IOException {
    Path target = layerPath(id);
    // The rename below must not become durable before the files it publishes.
    HostCommand.check(List.of("sync", "--file-system", dir.toString()));
    boolean duplicate =
        withStoreLock(
            () -> {
              ensureLayersDir();
              build.pins.add(id);
              writePins(build);
              if (Files.exists(target, NOFOLLOW)) {
                return true;
              }
              Files.move(dir, target, StandardCopyOption.ATOMIC_MOVE);
              AtomicFiles.syncDirectory(layersDir);
              return false;
            });
    if (duplicate) {
      Trees.delete(dir);
    }
  }

  /**
   * Publishes image {@code name} made of layers {@code layerIds} (bottom first, all pinned by
   * {@code build}): its manifest replaces the old one in one rename, and the old image's layers
   * that nothing uses any more are deleted. The caller holds {@code name}'s lock.
   */
  public Image publish(
      Build build,
      String name,
      List<String> layerIds,
      long sizeBytes,
      String description,
      List<String> packages)
      throws IOException {
    return publish(build, name, layerIds, sizeBytes, description, packages, null);
  }

  /** {@link #publish} of a snapshot of a sandbox, described by {@code snapshot}. */
  public Image publish(
      Build build,
      String name,
      List<String> layerIds,
      long sizeBytes,
      String description,
      List<String> packages,
      Snapshot snapshot)
      throws IOException {
    Instant created = Instant.now();
    Manifest manifest =
        new Manifest(
            FORMAT_VERSION,
            name,
            created.toString(),
            sizeBytes,
            description,
            packages,
            List.copyOf(layerIds),
            snapshot);
    Path manifestDir = Files.createDirectory(build.dir().resolve("image"));
    Files.setPosixFilePermissions(manifestDir, PrivateFiles.PRIVATE_DIR);
    AtomicFiles.write(manifestDir.resolve(MANIFEST), JSON.writeValueAsBytes(manifest));
    Path target = imagesDir.resolve(name);
    List<Path> trash =
        withStoreLock(
            () -> {
              for (String id : layerIds) {
                if (!build.pins.contains(id) || !Files.isDirectory(layerPath(id), NOFOLLOW)) {
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
                migrateQuietly(name); // a format-1 rootfs may be a running sandbox's layer
                oldLayers = layerIdsOf(name);
                old = imagesDir.resolve(OLD_PREFIX + name + "-" + randomSuffix());
                Files.move(target, old, StandardCopyOption.ATOMIC_MOVE);
              }
              Files.move(manifestDir, target, StandardCopyOption.ATOMIC_MOVE);
              AtomicFiles.syncDirectory(imagesDir);
              List<Path> unused = new ArrayList<>();
              if (old != null) {
                unused.add(old);
                unused.addAll(trashUnused(oldLayers));
              }
              return unused;
            });
    for (Path p : trash) {
      Trees.delete(p);
    }
    return new Image(
        name,
        layerIds,
        layerIds.stream().map(this::layerPath).toList(),
        created,
        sizeBytes,
        description);
  }

  private void writePins(Build build) throws IOException {
    AtomicFiles.write(
        build.dir().resolve(PINS),
        String.join("\n", build.pins).concat("\n").getBytes(StandardCharsets.UTF_8));
  }

  // ---- sandboxes ---------------------------------------------------------------------------

  /**
   * Called once a sandbox's record names {@code image}'s layers: checks under the store lock that
   * they all still exist. From then on no remove, rebuild or gc deletes them, since each decides
   * under that lock, reading every record. The record is written before, outside the lock, so the
   * lock is held only for a few stats however many sandboxes are being created.
   *
   * @throws WorkspaceException if one is gone: the image was rebuilt or removed since it was looked
   *     up
   */
  public void checkLayersKept(Image image) {
    boolean intact =
        withStoreLock(() -> image.layers().stream().allMatch(l -> Files.isDirectory(l, NOFOLLOW)));
    if (!intact) {
      throw new WorkspaceException(
          "image '"
              + image.name()
              + "' was rebuilt or removed while the sandbox was being created: try again");
    }
  }

  /**
   * The layers a sandbox was created on ({@code layers}, from its record), as an image named like
   * its {@code image}. A record from before layers names none (null): its image's old root
   * filesystem is moved to its layer first if that has not happened yet.
   */
  public Image layersFor(String image, List<String> layers) {
    if (layers == null && image != null) {
      try {
        find(image); // migrates a format-1 image
      } catch (WorkspaceException damaged) {
        // then its layer is missing, which the caller reports
      }
    }
    return ofLayers(image == null ? DEFAULT : image, layersOf(image, layers));
  }

  // ---- gc ----------------------------------------------------------------------------------

  /**
   * Deletes what interrupted builds and removals left ({@code .build-*}, {@code .old-*}), except
   * those of a name whose lock someone holds right now: that build is still running; then every
   * layer that no image, sandbox or running build uses. Returns a line per thing removed.
   */
  public List<String> gc() {
    List<String> removed = new ArrayList<>();
    for (Path leftover : leftovers()) {
      Optional<String> owner = ownerOf(leftover);
      if (owner.isEmpty()) {
        uncheckedDelete(leftover);
        removed.add("leftover of an interrupted image build " + leftover.getFileName());
        continue;
      }
      tryWithLock(
          owner.get(),
          () -> {
            Trees.delete(leftover);
            removed.add("leftover of an interrupted image build of " + owner.get());
            return null;
          });
    }
    if (!Files.isDirectory(layersDir, NOFOLLOW)) {
      return removed;
    }
    List<Path> trash = new ArrayList<>(trashLeftovers());
    List<Path> unused;
    try {
      unused = withStoreLock(() -> trashUnused(allLayerIds()));
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

  private List<String> allLayerIds() throws IOException {
    try (Stream<Path> entries = Files.list(layersDir)) {
      return entries
          .map(p -> p.getFileName().toString())
          .filter(n -> LAYER_ID.matcher(n).matches())
          .toList();
    }
  }

  private List<Path> trashLeftovers() {
    try (Stream<Path> entries = Files.list(layersDir)) {
      return entries.filter(p -> p.getFileName().toString().startsWith(TRASH_PREFIX)).toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list " + layersDir, e);
    }
  }

  /**
   * Under the store lock: renames each of {@code candidates} that nothing uses to {@code
   * layers/.trash-<id>-<r>} (gone from the store at once) and returns those, for the caller to
   * delete after releasing the lock.
   */
  private List<Path> trashUnused(List<String> candidates) throws IOException {
    if (candidates.isEmpty()) {
      return List.of();
    }
    Set<String> used = layersInUse();
    List<Path> trash = new ArrayList<>();
    for (String id : new LinkedHashSet<>(candidates)) {
      Path layer = layerPath(id);
      if (used.contains(id) || !Files.exists(layer, NOFOLLOW)) {
        continue;
      }
      Path renamed = layersDir.resolve(TRASH_PREFIX + id + "-" + randomSuffix());
      Files.move(layer, renamed, StandardCopyOption.ATOMIC_MOVE);
      trash.add(renamed);
    }
    if (!trash.isEmpty()) {
      AtomicFiles.syncDirectory(layersDir);
    }
    return trash;
  }

  /**
   * Under the store lock: every layer an image manifest lists, a build pinned, or a sandbox runs on
   * ({@link LayerUsers}). Anything unreadable fails the scan (nothing is deleted then) rather than
   * risk deleting a layer in use.
   */
  private Set<String> layersInUse() throws IOException {
    Set<String> used = new HashSet<>();
    for (String name : imageNames()) {
      Path manifestFile = imagesDir.resolve(name).resolve(MANIFEST);
      if (!Files.exists(manifestFile, NOFOLLOW)) {
        continue;
      }
      Manifest m = JSON.readValue(Files.readAllBytes(manifestFile), Manifest.class);
      if (m.formatVersion() == LEGACY_FORMAT_VERSION) {
        used.add(legacyLayerId(name));
      } else if (m.layers() != null) {
        used.addAll(m.layers());
      }
    }
    for (Path build : leftovers()) {
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

  // ---- locks and files ---------------------------------------------------------------------

  private void ensureLayersDir() throws IOException {
    if (!Files.isDirectory(layersDir, NOFOLLOW)) {
      PrivateFiles.createPrivateDirectories(imagesDir);
      try {
        Files.createDirectory(
            layersDir,
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
      } catch (java.nio.file.FileAlreadyExistsException e) {
        // made meanwhile
      }
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

  /**
   * Runs {@code action} holding the store lock, which guards what uses which layer. Reentrant: a
   * thread that holds it already just runs the action.
   */
  private <T> T withStoreLock(LockedAction<T> action) {
    Path lockFile;
    try {
      PrivateFiles.createPrivateDirectories(imagesDir);
      lockFile = imagesDir.toRealPath().resolve(STORE_LOCK);
    } catch (IOException e) {
      throw new WorkspaceException("cannot create " + imagesDir + ": " + e.getMessage(), e);
    }
    Set<Path> held = HELD_STORE_LOCKS.get();
    if (held.contains(lockFile)) {
      try {
        return action.run();
      } catch (IOException e) {
        throw new WorkspaceException("image store " + imagesDir + ": " + e.getMessage(), e);
      }
    }
    try (FileLock lock = FileLock.acquire(lockFile)) {
      held.add(lockFile);
      try {
        return action.run();
      } finally {
        held.remove(lockFile);
      }
    } catch (IOException e) {
      throw new WorkspaceException("image store " + imagesDir + ": " + e.getMessage(), e);
    }
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
    // Held by this very thread (a gc inside a build): the build is running.
    if (jvmLock.isHeldByCurrentThread() || !jvmLock.tryLock()) {
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
      PrivateFiles.createPrivateDirectories(imagesDir);
      // The real path: two stores reaching one directory by different paths share JVM locks.
      return imagesDir.toRealPath().resolve(LOCK_PREFIX + name);
    } catch (IOException e) {
      throw new WorkspaceException("cannot create " + imagesDir, e);
    }
  }

  private static FileChannel openLock(Path lockFile) throws IOException {
    return FileChannel.open(
        lockFile,
        java.util.Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE),
        PrivateFiles.privateFile());
  }

  private static void uncheckedDelete(Path tree) {
    try {
      Trees.delete(tree);
    } catch (IOException e) {
      throw new WorkspaceException("cannot delete " + tree, e);
    }
  }

  public static String sha256Hex(byte[] bytes) {
    return HexFormat.of().formatHex(sha256().digest(bytes));
  }

  public static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("no SHA-256 in this JVM", e);
    }
  }

  private static String randomSuffix() {
    return HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong());
  }

  public static void checkName(String name) {
    if (name == null || !NAME.matcher(name).matches() || name.equals(LAYERS)) {
      throw new WorkspaceException(
          "invalid image name "
              + (name == null ? "null" : "\"" + name + "\"")
              + ": use 1 to 63 characters from a-z, 0-9, '.', '_' and '-', starting with a"
              + " letter or digit (and not \"layers\")");
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
