package dev.sandbox4j.runtime.internal.image;

import static dev.sandbox4j.runtime.internal.image.StoreLayout.NOFOLLOW;
import static dev.sandbox4j.runtime.internal.image.StoreLayout.OLD_PREFIX;

import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.registry.ImageReference;
import dev.sandbox4j.runtime.internal.registry.RegistryClient;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;

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
 *   <li>{@code <name>/image.json}: the manifest, {@value Manifests#FORMAT_VERSION}: its layer ids
 *       bottom first, created, size, description. Format 1 (before layers) had {@code
 *       <name>/rootfs/}; the first {@link #find} of such an image moves that directory to {@code
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
 *
 * <p>This class is the store's entry point, for the crun engine and any other backend (see the
 * package's documentation); the work is done by its parts: {@link StoreLayout} (paths and names),
 * {@link StoreLocks}, {@link Manifests} (reading, writing, format 1), {@link Staging} (builds,
 * pins, layers, publishing), {@link DefaultImage} and {@link StoreGc}.
 */
public final class ImageStore {
  public static final String DEFAULT = "default";

  /**
   * What an image saved from a sandbox (the engine's {@code Lifecycle.snapshot}) remembers of it:
   * the sandbox, its image, the size every sandbox made from the snapshot keeps, and the named
   * networks it was on, which every sandbox made from the snapshot joins (null in snapshots saved
   * before networks). {@code identity} is who the sandbox ran as, where and with what environment,
   * as an image config (numeric {@code User}, {@code WorkingDir}, the whole environment as {@code
   * Env}), which every sandbox made from the snapshot keeps; null for a sandbox that ran as the
   * seeds do (user {@code sandbox} in {@code /home/sandbox}), and in snapshots saved before.
   */
  public record Snapshot(
      String sandbox,
      String image,
      int cpus,
      long memoryBytes,
      int pids,
      List<String> networks,
      long diskBytes,
      long diskInodes,
      ImageConfig identity) {
    public Snapshot {
      networks = networks == null ? List.of() : List.copyOf(networks);
    }

    /** A snapshot of a sandbox that ran as the seeds do. */
    public Snapshot(
        String sandbox,
        String image,
        int cpus,
        long memoryBytes,
        int pids,
        List<String> networks,
        long diskBytes,
        long diskInodes) {
      this(sandbox, image, cpus, memoryBytes, pids, networks, diskBytes, diskInodes, null);
    }
  }

  /**
   * Where an image that came from elsewhere came from, and how its config says to run it.
   *
   * @param reference the registry reference it was pulled from, canonical ({@code
   *     docker.io/library/python:3.12-slim}); null for an imported archive
   * @param digest the digest of its image manifest ({@code sha256:...}); null if not known
   * @param config its image config's user, working directory, environment, entrypoint and command
   */
  public record Origin(String reference, String digest, ImageConfig config) {
    public Origin {
      config = config == null ? ImageConfig.NONE : config;
    }
  }

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

  private final StoreLayout layout;
  private final StoreLocks locks;
  private final Manifests manifests;
  private final StoreGc gc;
  private final Staging staging;
  private final DefaultImage defaultImage;

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
    this.layout = new StoreLayout(imagesDir);
    this.locks = new StoreLocks(imagesDir);
    this.manifests = new Manifests(layout, locks);
    this.gc = new StoreGc(layout, locks, manifests, sandboxes);
    this.staging = new Staging(layout, locks, manifests, gc);
    this.defaultImage = new DefaultImage(locks, manifests, staging, defaultBuilder);
  }

  Path directory() {
    return layout.imagesDir();
  }

  /** Where layer {@code id} lives (whether or not it exists). */
  public Path layerPath(String id) {
    return layout.layerPath(id);
  }

  /** The layer that format-1 image {@code name}'s root filesystem becomes. */
  static String legacyLayerId(String name) {
    return StoreLayout.legacyLayerId(name);
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
    return manifests.find(name);
  }

  /** What image {@code name} remembers of the sandbox it was saved from; empty if none. */
  public Optional<Snapshot> snapshotOf(String name) {
    checkName(name);
    return manifests.read(name).map(Manifests.Manifest::snapshot);
  }

  /**
   * Whether image {@code name} is being written at this moment: built, imported, saved as a
   * snapshot or removed, by this JVM or another (its name's lock is held). A hint for messages: the
   * answer may change as soon as it is given.
   */
  public boolean isBeingWritten(String name) {
    checkName(name);
    return locks.isHeld(name);
  }

  /** Every complete image, sorted by name. */
  public List<Image> list() {
    return manifests.list();
  }

  // ---- removing ---------------------------------------------------------------------------

  /**
   * Removes the image called {@code name}; does nothing if there is none. Its layers that no other
   * image, sandbox or build uses are deleted; sandboxes created from it keep running on theirs.
   */
  public void remove(String name) {
    checkName(name);
    Path imagesDir = layout.imagesDir();
    if (!Files.isDirectory(imagesDir)) {
      return;
    }
    locks.withLock(
        name,
        () -> {
          Path image = imagesDir.resolve(name);
          if (!Files.exists(image, NOFOLLOW)) {
            return null;
          }
          List<Path> trash =
              locks.withStoreLock(
                  () -> {
                    // a format-1 rootfs may be a running sandbox's layer
                    manifests.migrateQuietly(name);
                    List<String> layers = manifests.layerIdsOf(name);
                    // Rename first: the name is gone at once; a crash mid-delete leaves an .old-*.
                    Path old =
                        imagesDir.resolve(OLD_PREFIX + name + "-" + StoreLayout.randomSuffix());
                    Files.move(image, old, StandardCopyOption.ATOMIC_MOVE);
                    AtomicFiles.syncDirectory(imagesDir);
                    List<Path> unused = new ArrayList<>(gc.trashUnused(layers));
                    unused.add(old);
                    return unused;
                  });
          for (Path p : trash) {
            Trees.delete(p);
          }
          return null;
        });
  }

  // ---- the default image -------------------------------------------------------------------

  /** The default image, built first if there is none yet (once, however many callers race). */
  public Image ensureDefault(Consumer<String> progress) {
    return defaultImage.ensure(progress);
  }

  /** Builds the default image anew and replaces the old one (if any) in one rename. */
  public Image buildDefault(Consumer<String> progress) {
    return defaultImage.build(progress);
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
    return locks.withLock(
        name,
        () -> {
          try {
            return staging.inStaging(
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
                          imported.origin());
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

  // ---- pulling ---------------------------------------------------------------------------

  /** The name image {@code ref} is stored under once pulled (see {@link #pull}). */
  public static String pulledName(ImageReference ref) {
    return RegistryPull.localName(ref);
  }

  /**
   * Pulls image {@code ref} from its registry with {@code client} and stores it as {@link
   * #pulledName}, replacing an older pull of the same reference; layers the store has are not
   * downloaded again, and an image whose manifest digest has not changed is kept as it is (see
   * {@link RegistryPull}).
   *
   * @throws dev.sandbox4j.runtime.internal.registry.RegistryException if the registry refuses,
   *     cannot be reached, or sends what does not match its digests
   * @throws ImageBuildException if a layer is unsafe or unsupported
   * @throws PullRefusedException if the image is larger than {@code limit} allows, or the disk
   *     would go below its reserve
   */
  public Image pull(
      ImageReference ref, RegistryClient client, Consumer<String> progress, PullLimit limit) {
    String name = pulledName(ref);
    return locks.withLock(
        name,
        () -> {
          try {
            return staging.inStaging(
                name,
                build -> new RegistryPull(this, client, progress, limit).pull(build, name, ref));
          } catch (IOException e) {
            throw new ImageBuildException("pulling " + ref + " failed: " + e, e);
          }
        });
  }

  // ---- pushing ---------------------------------------------------------------------------

  /**
   * Pushes image {@code name} (a snapshot too) to {@code ref}'s registry with {@code client}, as an
   * OCI image tagged {@code ref}'s tag, and returns the digest of its manifest: each layer exported
   * as a gzip tarball (see {@link LayerExport}) and uploaded unless the registry has it, then its
   * config and manifest (see {@link RegistryPush}). An image of Sandbox4j's own, which has no
   * config, is pushed with {@code ownImagesConfig}: how the engine runs it. The image is kept from
   * being removed or replaced while it is pushed (its name's lock).
   *
   * @throws IllegalArgumentException if {@code ref} has a digest, or no tag
   * @throws WorkspaceException if there is no image {@code name}
   * @throws dev.sandbox4j.runtime.internal.registry.RegistryException if the registry refuses or
   *     cannot be reached
   * @throws ImageBuildException if a layer cannot be exported
   */
  public String push(
      String name,
      ImageReference ref,
      RegistryClient client,
      ImageConfig ownImagesConfig,
      Consumer<String> progress) {
    checkName(name);
    if (ref.digest() != null || ref.tag() == null) {
      throw new IllegalArgumentException(
          "push to a reference with a tag and no digest ("
              + ref.host()
              + "/"
              + ref.repository()
              + ":TAG), not "
              + ref
              + ": the registry gives the digest");
    }
    return locks.withLock(
        name,
        () -> {
          try {
            return staging.inStaging(
                name,
                build -> {
                  Image image =
                      find(name)
                          .orElseThrow(
                              () ->
                                  new WorkspaceException(
                                      "no image '" + name + "' here: see `sandbox4j image ls`"));
                  staging.pin(build, image);
                  Snapshot snapshot = snapshotOf(name).orElse(null);
                  return new RegistryPush(this, client, progress)
                      .push(build, image, snapshot, ref, ownImagesConfig);
                });
          } catch (IOException e) {
            throw new ImageBuildException("pushing " + name + " to " + ref + " failed: " + e, e);
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

    /** The layers this build pinned, written to {@code pins} under the store lock. */
    final Set<String> pins = new LinkedHashSet<>();

    private int scratch;

    Build(Path dir) {
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

  /** Runs {@code action} holding image {@code name}'s build lock (see the class comment). */
  public <T> T withNameLock(String name, BuildAction<T> action) {
    checkName(name);
    return locks.withLock(name, () -> staging.inStaging(name, action));
  }

  /**
   * Pins the layers of {@code image} for {@code build}, failing if one is gone (the image was
   * rebuilt or removed since it was looked up).
   */
  public void pin(Build build, Image image) {
    staging.pin(build, image);
  }

  /** Pins layer {@code id} for {@code build} if the store has it; whether it has. */
  public boolean pinIfPresent(Build build, String id) {
    return staging.pinIfPresent(build, id);
  }

  /**
   * Makes the complete directory {@code dir} (in {@code build}'s staging area) layer {@code id},
   * pinned for {@code build}. If the store has that layer already (made meanwhile by someone else),
   * {@code dir} is discarded and the existing one kept.
   */
  public void addLayer(Build build, Path dir, String id) throws IOException {
    staging.addLayer(build, dir, id);
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
    return staging.publish(build, name, layerIds, sizeBytes, description, packages, snapshot, null);
  }

  /** {@link #publish} of an image that came from elsewhere: a registry or an archive. */
  public Image publish(
      Build build,
      String name,
      List<String> layerIds,
      long sizeBytes,
      String description,
      Origin origin)
      throws IOException {
    return staging.publish(build, name, layerIds, sizeBytes, description, List.of(), null, origin);
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
        locks.withStoreLock(
            () -> image.layers().stream().allMatch(l -> Files.isDirectory(l, NOFOLLOW)));
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
    return gc.gc();
  }

  // ---- names and ids -----------------------------------------------------------------------

  public static String sha256Hex(byte[] bytes) {
    return StoreLayout.sha256Hex(bytes);
  }

  public static MessageDigest sha256() {
    return StoreLayout.sha256();
  }

  public static void checkName(String name) {
    StoreLayout.checkName(name);
  }
}
