package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A sandbox's life after creation: suspend (every process frozen, memory kept), stop (every process
 * ended, the overlay unmounted, the writable layer kept), waking from either, a files-only fork and
 * a snapshot.
 *
 * <p><b>On disk.</b> Each transition holds the sandbox's lock and writes its record ({@code
 * state.json}, atomically) so that a crash at any point leaves a usable sandbox: {@code SUSPENDED}
 * and {@code STOPPED} are written <em>before</em> the processes are frozen or ended, {@code
 * RUNNING} only <em>after</em> they are thawed or started ({@link Engine#attach}). A record saying
 * {@code RUNNING} therefore always means thawed, which lets every operation check with one read of
 * the record ({@link Engine#wake}); a record saying {@code SUSPENDED} or {@code STOPPED} may belong
 * to a sandbox still on its way there, which the next operation wakes as it would a sleeping one,
 * and which {@code gc} brings to the state its record names ({@link #finishInterrupted}). A fork or
 * snapshot freezes a running sandbox for its copy the same way: {@code SUSPENDED} first, {@code
 * RUNNING} again after the thaw.
 *
 * <p><b>Fork copies files, not processes.</b> The new sandbox gets a copy of the writable layer
 * ({@code cp --reflink=auto}: copy-on-write where the file system can, a full copy elsewhere) on
 * the same image layers, with the same size and labels, and starts with a fresh init. Copying
 * processes needs checkpoint/restore (CRIU), which this engine does not do.
 */
final class Lifecycle {
  /** What {@link ForkResult#reason()} says. */
  static final String NO_PROCESSES =
      "the local engine copies files only: live process copy needs checkpoint/restore (CRIU),"
          + " which it does not do; the fork starts with no processes but its init";

  private static final System.Logger LOG = System.getLogger(Lifecycle.class.getName());
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  private final Engine engine;

  Lifecycle(Engine engine) {
    this.engine = engine;
  }

  // ---- suspend, stop, wake ------------------------------------------------------------------

  /**
   * Freezes every process of the sandbox; its memory is kept. Idempotent; a stopped sandbox stays
   * stopped (nothing runs to freeze).
   */
  void suspend(String id) {
    locked(
        id,
        (dir, current) -> {
          switch (current.status()) {
            case STOPPED -> {
              return null;
            }
            case RUNNING -> write(dir, current, SandboxRecord.Status.SUSPENDED);
            default -> {}
          }
          Freezer.freeze(engine.cgroups(), id);
          LOG.log(System.Logger.Level.INFO, "Suspended local sandbox {0}", id);
          return null;
        });
  }

  /**
   * Ends every process of the sandbox and unmounts its root; its writable layer is kept. Idempotent
   * (again on a stopped one, it finishes an interrupted stop).
   */
  void stop(String id) {
    locked(
        id,
        (dir, current) -> {
          if (current.status() != SandboxRecord.Status.STOPPED) {
            write(dir, current, SandboxRecord.Status.STOPPED);
          }
          endProcesses(engine, id, dir);
          LOG.log(System.Logger.Level.INFO, "Stopped local sandbox {0}", id);
          return null;
        });
  }

  /** Wakes a suspended or stopped sandbox (and restarts a running one whose container is gone). */
  void start(String id) {
    engine.attach(id);
  }

  private static void endProcesses(Engine engine, String id, Path dir) {
    Freezer.thaw(engine.cgroups(), id); // a frozen process would not die
    engine.runtime().delete(id);
    engine.cgroups().removeSandbox(id);
    Overlay.unmount(dir.resolve("rootfs"));
  }

  /**
   * For gc, holding the lock of a sandbox nobody else uses: brings a sandbox whose suspend or stop
   * was interrupted to the state its record names.
   */
  static void finishInterrupted(Engine engine, SandboxRecord record) {
    String id = record.id();
    switch (record.status()) {
      case SUSPENDED -> {
        if (!Freezer.isFrozen(engine.cgroups(), id)
            && engine.runtime().status(id).filter("running"::equals).isPresent()) {
          Freezer.freeze(engine.cgroups(), id);
          LOG.log(System.Logger.Level.INFO, "gc: finished suspending local sandbox {0}", id);
        }
      }
      case STOPPED -> {
        Path dir = engine.dir(id);
        if (engine.runtime().status(id).isPresent() || Overlay.isMounted(dir.resolve("rootfs"))) {
          endProcesses(engine, id, dir);
          LOG.log(System.Logger.Level.INFO, "gc: finished stopping local sandbox {0}", id);
        }
      }
      default -> {}
    }
  }

  // ---- fork ---------------------------------------------------------------------------------

  /**
   * A new running sandbox with a copy of {@code parentId}'s files, on the same image layers, with
   * the same size and labels. A running parent is frozen while its writable layer is copied.
   */
  ForkResult fork(String parentId, Consumer<String> progress) {
    SandboxRecord parent = engine.record(parentId);
    if (!parent.status().isUsable()) {
      throw Engine.unavailable(parentId, "it is " + describe(parent.status()));
    }
    Engine.Spec spec =
        new Engine.Spec(
            parent.image(),
            Engine.HOME, // copied with the files; nothing to create
            new OciConfig.Limits(parent.memoryBytes(), parent.cpus(), parent.pids()),
            parent.labels(),
            ImageStore.layersOf(parent));
    String child =
        engine.create(
            spec,
            progress,
            (dir, id) -> {
              Path upper = dir.resolve("upper");
              whileFrozen(
                  parentId,
                  (parentDir, p) -> {
                    copyTree(parentDir.resolve("upper"), upper);
                    return null;
                  });
              Files.createDirectories(dir.resolve("work"));
              Files.createDirectories(dir.resolve("rootfs"));
              renameHost(upper, parentId, id);
            });
    LOG.log(System.Logger.Level.INFO, "Forked local sandbox {0} as {1}", parentId, child);
    return new ForkResult(new WorkspaceRef(LocalSandbox.NAME, child), false, NO_PROCESSES);
  }

  /** The fork is called {@code child}: its {@code /etc/hostname} and {@code /etc/hosts} say so. */
  private static void renameHost(Path upper, String parent, String child) throws IOException {
    Pattern word = Pattern.compile("\\b" + Pattern.quote(parent) + "\\b");
    for (String name : List.of("hostname", "hosts")) {
      Path file = upper.resolve("etc").resolve(name);
      if (Files.isRegularFile(file, NOFOLLOW)) {
        String text = Files.readString(file, StandardCharsets.UTF_8);
        String renamed = word.matcher(text).replaceAll(Matcher.quoteReplacement(child));
        if (!renamed.equals(text)) {
          Files.writeString(file, renamed, StandardCharsets.UTF_8); // keeps owner and mode
        }
      }
    }
  }

  // ---- snapshot -----------------------------------------------------------------------------

  /**
   * Saves sandbox {@code id}'s files as image {@code name}: its image's layers plus a copy of its
   * writable layer (without its own hostname files), and the size it has. The image appears under
   * its name only when complete. A snapshot of that name is replaced; any other image is not.
   */
  Image snapshot(String id, String name) {
    ImageStore images = engine.images();
    ImageStore.checkName(name);
    SandboxRecord first = engine.record(id);
    checkNotAnImage(images, name);
    long baseSize = baseSize(images, first);
    return images.withNameLock(
        name,
        build -> {
          checkNotAnImage(images, name);
          Path layer = build.dir().resolve("snapshot-layer");
          SandboxRecord[] saved = new SandboxRecord[1];
          whileFrozen(
              id,
              (dir, record) -> {
                saved[0] = record;
                // Pinned while the sandbox's record still keeps them: it may be destroyed after.
                images.pin(build, images.ofLayers(record.image(), ImageStore.layersOf(record)));
                copyTree(dir.resolve("upper"), layer);
                return null;
              });
          SandboxRecord record = saved[0];
          RecipeBuild.dropSandboxOwnFiles(layer);
          long size = RootfsOwnership.sizeOf(layer) + baseSize;
          byte[] random = new byte[32];
          RANDOM.nextBytes(random);
          String layerId = ImageStore.sha256Hex(random);
          images.addLayer(build, layer, layerId);
          List<String> layers = new ArrayList<>(ImageStore.layersOf(record));
          layers.add(layerId);
          Image image =
              images.publish(
                  build,
                  name,
                  layers,
                  size,
                  "snapshot of local:" + id + " (image " + record.image() + ")",
                  List.of(),
                  new ImageStore.Snapshot(
                      id, record.image(), record.cpus(), record.memoryBytes(), record.pids()));
          LOG.log(System.Logger.Level.INFO, "Saved local sandbox {0} as snapshot {1}", id, name);
          return image;
        });
  }

  private static void checkNotAnImage(ImageStore images, String name) {
    if (images.find(name).isPresent() && images.snapshotOf(name).isEmpty()) {
      throw new IllegalArgumentException(
          "image '" + name + "' exists and is not a snapshot: choose another name");
    }
  }

  /** The size of the sandbox's image, if the image of that name still has its layers. */
  private static long baseSize(ImageStore images, SandboxRecord record) {
    try {
      return images
          .find(record.image())
          .filter(i -> i.layerIds().equals(ImageStore.layersOf(record)))
          .map(Image::sizeBytes)
          .orElse(0L);
    } catch (WorkspaceException | IllegalArgumentException e) {
      return 0;
    }
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** What runs under a sandbox's lock with its current record. */
  private interface Locked<T> {
    T run(Path dir, SandboxRecord current) throws IOException;
  }

  /** Runs {@code action} holding the lock of usable sandbox {@code id}. */
  private <T> T locked(String id, Locked<T> action) {
    engine.record(id); // unavailable if there is none
    Path dir = engine.dir(id);
    try (FileLock lock = FileLock.acquire(dir.resolve("lock"))) {
      SandboxRecord current = engine.record(id); // re-read under the lock
      if (!current.status().isUsable()) {
        throw Engine.unavailable(id, "it is " + describe(current.status()));
      }
      return action.run(dir, current);
    } catch (NoSuchFileException e) {
      throw Engine.unavailable(id, "it was destroyed");
    } catch (IOException e) {
      throw new WorkspaceException("cannot change the state of local:" + id + ": " + e, e);
    }
  }

  /**
   * Runs {@code action} holding sandbox {@code id}'s lock, its processes frozen if it runs (its
   * record says SUSPENDED meanwhile, so a crash leaves it merely suspended).
   */
  private <T> T whileFrozen(String id, Locked<T> action) throws IOException {
    return locked(
        id,
        (dir, current) -> {
          boolean freeze = current.status() == SandboxRecord.Status.RUNNING;
          if (freeze) {
            write(dir, current, SandboxRecord.Status.SUSPENDED);
            Freezer.freeze(engine.cgroups(), id);
          }
          try {
            return action.run(dir, current);
          } finally {
            if (freeze) {
              Freezer.thaw(engine.cgroups(), id);
              write(dir, current, SandboxRecord.Status.RUNNING);
            }
          }
        });
  }

  private static void write(Path dir, SandboxRecord record, SandboxRecord.Status status)
      throws IOException {
    record.withStatus(status).write(dir.resolve("state.json"));
  }

  /**
   * Copies the tree {@code from} to {@code to} (which must not exist, or be empty) with owners,
   * modes, xattrs (overlay's opaque markers) and device nodes (its whiteouts); copy-on-write where
   * the file system supports it.
   */
  static void copyTree(Path from, Path to) {
    if (!Files.isDirectory(from, NOFOLLOW)) {
      throw new WorkspaceException("cannot copy " + from + ": it is not a directory");
    }
    HostCommand.check(
        List.of("cp", "-a", "--reflink=auto", "-T", "--", from.toString(), to.toString()));
  }

  private static String describe(SandboxRecord.Status status) {
    return switch (status) {
      case CREATING -> "being created (or was interrupted: `sandbox4j gc` removes it)";
      case DESTROYING -> "being destroyed";
      default -> status.name().toLowerCase(Locale.ROOT);
    };
  }
}
