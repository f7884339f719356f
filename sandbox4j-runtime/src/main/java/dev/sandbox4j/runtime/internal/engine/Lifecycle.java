package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.image.RootfsOwnership;
import dev.sandbox4j.runtime.internal.linux.Beneath;
import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
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
 * <p><b>Hibernate</b> ({@link #hibernate}) checkpoints every process with CRIU ({@link
 * Checkpoints#dumpAndStop}) into {@code checkpoint.partial/}, renamed to {@code checkpoint/} once
 * complete, then deletes the container and unmounts the root: memory is freed, files kept. {@code
 * HIBERNATED} is written before the dump; waking ({@link Engine#attach} → {@link #wakeHibernated})
 * restores from {@code checkpoint/}, writes {@code RUNNING}, then deletes the images. A hibernate
 * interrupted before its checkpoint was complete ends as a stop (files kept, processes lost, said
 * in the log), or as running if its processes still run.
 *
 * <p><b>Fork</b> copies the writable layer ({@code cp --reflink=auto}: copy-on-write where the file
 * system can, a full copy elsewhere) onto the same image layers, with the same size and labels,
 * and, where checkpoint/restore works ({@link Checkpoints#unavailable}), the processes too: a
 * running parent is dumped leaving it running, frozen while it is dumped and its files copied (so
 * both match), and the fork is restored from that dump instead of starting afresh; a suspended
 * parent is woken first, like for any operation; a hibernated one stays hibernated and the fork is
 * restored from a copy of its checkpoint. A stopped parent has no processes: files only. When
 * processes are not copied, {@code ForkResult.reason()} says why; the fork then starts with a fresh
 * init.
 */
public final class Lifecycle {
  /** A hibernated sandbox's complete checkpoint, in its directory. */
  public static final String CHECKPOINT = "checkpoint";

  /** A checkpoint being written; renamed to {@link #CHECKPOINT} once complete. */
  public static final String CHECKPOINT_PARTIAL = "checkpoint.partial";

  /** A fork's images, in the fork's directory while it is created. */
  private static final String FORK_IMAGES = "fork-images";

  private static final System.Logger LOG = System.getLogger(Lifecycle.class.getName());
  private static final SecureRandom RANDOM = new SecureRandom();

  private final Engine engine;

  public Lifecycle(Engine engine) {
    this.engine = engine;
  }

  // ---- suspend, stop, wake ------------------------------------------------------------------

  /**
   * Freezes every process of the sandbox; its memory is kept. Idempotent; a stopped sandbox stays
   * stopped (nothing runs to freeze).
   */
  public void suspend(String id) {
    locked(
        id,
        (dir, current) -> {
          switch (current.status()) {
            case STOPPED, HIBERNATED -> {
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
  public void stop(String id) {
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

  /**
   * Wakes a suspended, stopped or hibernated sandbox (and restarts a running one whose container is
   * gone).
   */
  public void start(String id) {
    engine.attach(id);
  }

  /** Ends the processes, unmounts the root and deletes any checkpoint: a stopped sandbox. */
  private static void endProcesses(Engine engine, String id, Path dir) throws IOException {
    Freezer.thaw(engine.cgroups(), id); // a frozen process would not die
    engine.runtimeOf(id).delete(id);
    engine.cgroups().removeSandbox(id);
    Overlay.unmount(dir.resolve("rootfs"));
    deleteCheckpoint(dir);
  }

  private static void deleteCheckpoint(Path dir) throws IOException {
    Trees.delete(dir.resolve(CHECKPOINT_PARTIAL));
    Trees.delete(dir.resolve(CHECKPOINT));
  }

  // ---- hibernate ----------------------------------------------------------------------------

  /**
   * Checkpoints every process of the sandbox to disk (CRIU) and ends them, freeing their memory;
   * the next operation restores them. Idempotent; a stopped sandbox stays stopped. Commands still
   * attached to a caller are not carried: they are killed (and logged).
   *
   * @throws WorkspaceException if checkpoint/restore is unavailable on this host, or the dump fails
   *     (the sandbox then goes on running, or is stopped if its processes ended meanwhile)
   */
  public void hibernate(String id) {
    Optional<String> why = Checkpoints.unavailable(engine.runtimeOf(id));
    if (why.isPresent()) {
      engine.record(id); // unavailable if there is none
      throw new WorkspaceException(
          "cannot hibernate local:"
              + id
              + ": "
              + why.get()
              + " (suspend keeps the processes in memory; stop ends them)");
    }
    locked(
        id,
        (dir, current) -> {
          SandboxRecord.Status status = current.status();
          if (status == SandboxRecord.Status.STOPPED
              || (status == SandboxRecord.Status.HIBERNATED
                  && Files.isDirectory(dir.resolve(CHECKPOINT)))) {
            return null;
          }
          Freezer.thaw(engine.cgroups(), id); // a suspended one: CRIU freezes it itself
          if (engine.runtimeOf(id).status(id).filter("running"::equals).isEmpty()) {
            write(dir, current, SandboxRecord.Status.STOPPED);
            endProcesses(engine, id, dir);
            LOG.log(
                System.Logger.Level.WARNING,
                "local sandbox {0} had no running container to hibernate: stopped it instead",
                id);
            return null;
          }
          write(dir, current, SandboxRecord.Status.HIBERNATED);
          Path partial = dir.resolve(CHECKPOINT_PARTIAL);
          deleteCheckpoint(dir);
          Checkpoints.Dump dump;
          try {
            dump = Checkpoints.dumpAndStop(engine, id, partial);
          } catch (WorkspaceException e) {
            Trees.delete(partial);
            String after;
            if (engine.runtimeOf(id).status(id).filter("running"::equals).isPresent()) {
              write(dir, current, SandboxRecord.Status.RUNNING);
              after = "it goes on running";
            } else {
              write(dir, current, SandboxRecord.Status.STOPPED);
              endProcesses(engine, id, dir);
              after = "its processes ended: it is stopped, its files kept";
            }
            throw new WorkspaceException(
                "cannot hibernate local:" + id + ": " + e.getMessage() + "; " + after, e);
          }
          Files.move(partial, dir.resolve(CHECKPOINT), StandardCopyOption.ATOMIC_MOVE);
          AtomicFiles.syncDirectory(dir);
          engine.cgroups().removeSandbox(id);
          Overlay.unmount(dir.resolve("rootfs"));
          if (!dump.notCarried().isEmpty()) {
            LOG.log(
                System.Logger.Level.WARNING,
                "Hibernating local sandbox {0} ended the commands still attached, which a"
                    + " checkpoint cannot carry: {1}",
                id,
                dump.notCarried());
          }
          LOG.log(
              System.Logger.Level.INFO,
              "Hibernated local sandbox {0} ({1} KiB of images in {2} ms)",
              id,
              dump.bytes() / 1024,
              dump.took().toMillis());
          return null;
        });
  }

  /**
   * For {@link Engine#attach}, holding the lock of a sandbox whose record says {@code HIBERNATED}:
   * restores its processes from its checkpoint and writes {@code RUNNING}. If its processes still
   * run (its hibernate was interrupted before the dump ended them), or it cannot be restored (no
   * complete checkpoint, or the restore fails), it leaves the caller to start it (afresh, files
   * kept) and says so in the log.
   */
  static void wakeHibernated(Engine engine, String id, Path dir) throws IOException {
    SandboxRecord record = engine.record(id);
    Path images = dir.resolve(CHECKPOINT);
    if (engine.runtimeOf(id).status(id).filter("running"::equals).isPresent()) {
      Trees.delete(dir.resolve(CHECKPOINT_PARTIAL));
      LOG.log(
          System.Logger.Level.WARNING,
          "local sandbox {0} was being hibernated when that was interrupted; its processes still"
              + " run, so it goes on running",
          id);
      return;
    }
    if (!Files.isDirectory(images)) {
      deleteCheckpoint(dir);
      LOG.log(
          System.Logger.Level.WARNING,
          "local sandbox {0} was being hibernated when that was interrupted, before its"
              + " checkpoint was complete: it starts afresh, files kept, processes lost",
          id);
      return;
    }
    long start = System.nanoTime();
    try {
      Checkpoints.restore(engine, id, images);
    } catch (WorkspaceException e) {
      engine.runtimeOf(id).delete(id);
      // A failed restore can leave the cgroups CRIU made (with children): a fresh start into them
      // fails (v1 devices refuses a deny-all with children).
      engine.cgroups().removeSandbox(id);
      deleteCheckpoint(dir);
      LOG.log(
          System.Logger.Level.WARNING,
          "cannot restore hibernated local sandbox {0}: it starts afresh, files kept, processes"
              + " lost: {1}",
          id,
          e.getMessage());
      return;
    }
    write(dir, record, SandboxRecord.Status.RUNNING);
    deleteCheckpoint(dir);
    LOG.log(
        System.Logger.Level.INFO,
        "Restored hibernated local sandbox {0} in {1} ms",
        id,
        (System.nanoTime() - start) / 1_000_000);
  }

  /**
   * For gc, holding the lock of a sandbox nobody else uses: brings a sandbox whose suspend or stop
   * was interrupted to the state its record names.
   */
  static void finishInterrupted(Engine engine, SandboxRecord record) throws IOException {
    String id = record.id();
    switch (record.status()) {
      case SUSPENDED -> {
        if (!Freezer.isFrozen(engine.cgroups(), id)
            && engine.runtimeOf(id).status(id).filter("running"::equals).isPresent()) {
          Freezer.freeze(engine.cgroups(), id);
          LOG.log(System.Logger.Level.INFO, "gc: finished suspending local sandbox {0}", id);
        }
      }
      case STOPPED -> {
        Path dir = engine.dir(id);
        if (engine.runtimeOf(id).status(id).isPresent()
            || Overlay.isMounted(dir.resolve("rootfs"))) {
          endProcesses(engine, id, dir);
          LOG.log(System.Logger.Level.INFO, "gc: finished stopping local sandbox {0}", id);
        }
      }
      case HIBERNATED -> finishHibernate(engine, record);
      default -> {}
    }
  }

  /**
   * gc's part for a record saying {@code HIBERNATED}: with a complete checkpoint, nothing may run
   * (a restore interrupted before it wrote {@code RUNNING} is undone: the checkpoint is still
   * there); without one, a sandbox whose processes still run is running, and any other is stopped.
   */
  private static void finishHibernate(Engine engine, SandboxRecord record) throws IOException {
    String id = record.id();
    Path dir = engine.dir(id);
    if (Files.isDirectory(dir.resolve(CHECKPOINT))) {
      if (engine.runtimeOf(id).status(id).isPresent() || Overlay.isMounted(dir.resolve("rootfs"))) {
        Freezer.thaw(engine.cgroups(), id);
        engine.runtimeOf(id).delete(id);
        engine.cgroups().removeSandbox(id);
        Overlay.unmount(dir.resolve("rootfs"));
        LOG.log(System.Logger.Level.INFO, "gc: finished hibernating local sandbox {0}", id);
      }
      return;
    }
    Trees.delete(dir.resolve(CHECKPOINT_PARTIAL));
    if (engine.runtimeOf(id).status(id).filter("running"::equals).isPresent()) {
      write(dir, record, SandboxRecord.Status.RUNNING);
      LOG.log(
          System.Logger.Level.WARNING,
          "gc: the hibernate of local sandbox {0} was interrupted before the dump ended its"
              + " processes: it is running",
          id);
      return;
    }
    write(dir, record, SandboxRecord.Status.STOPPED);
    endProcesses(engine, id, dir);
    LOG.log(
        System.Logger.Level.WARNING,
        "gc: the hibernate of local sandbox {0} was interrupted before its checkpoint was"
            + " complete: stopped it instead (files kept, processes lost)",
        id);
  }

  // ---- fork ---------------------------------------------------------------------------------

  /** The reason a fork gives when only its files were asked for. */
  static final String FILES_ONLY_ASKED = "only the files were asked for (forkFiles)";

  /**
   * A new running sandbox with a copy of {@code parentId}'s files, on the same image layers, with
   * the same size and labels, and its processes where checkpoint/restore works (see the class
   * comment). A running parent is frozen while it is dumped and its writable layer copied.
   */
  public Forked fork(String parentId, Consumer<String> progress, Inherit inherit) {
    return fork(parentId, progress, true, inherit);
  }

  /**
   * {@link #fork(String, Consumer, Inherit)}; with {@code processes} false, only the files are
   * copied (faster: no checkpoint) and the result says that this was asked for.
   */
  public Forked fork(
      String parentId, Consumer<String> progress, boolean processes, Inherit inherit) {
    SandboxRecord parent = engine.record(parentId);
    if (!parent.status().isUsable()) {
      throw Engine.unavailable(parentId, "it is " + describe(parent.status()));
    }
    Optional<String> unavailable =
        processes
            ? Checkpoints.unavailable(engine.runtime(parent.isolation()))
            : Optional.of(FILES_ONLY_ASKED);
    if (unavailable.isEmpty() && parent.status() == SandboxRecord.Status.SUSPENDED) {
      engine.attach(parentId); // woken like for any operation, so that its processes can be copied
    }
    Path parentDir = engine.dir(parentId);
    Engine.Spec spec =
        new Engine.Spec(
            parent.image(),
            null, // the parent's identity's, copied with the files: nothing to create
            new OciConfig.Limits(parent.memoryBytes(), parent.cpus(), parent.pids()),
            parent.labels(),
            parent.layerIds(),
            // The parent's policy and networks; one made before networks keeps loopback only.
            Networks.saved(parentDir).isEmpty()
                ? null
                : new Networks.Settings(Networks.policy(parentDir), Networks.networksOf(parentDir)),
            // The parent's quota; a parent made before disks gets the default.
            parent.diskLimit() == null ? SandboxDisk.Limit.DEFAULT : parent.diskLimit(),
            parent.isolation(),
            null,
            parent.identity()); // who the parent runs as, and where: its files are copied

    Fork fork = new Fork(parentId, unavailable, inherit);
    String child = engine.create(spec, progress, fork);
    LOG.log(
        System.Logger.Level.INFO,
        "Forked local sandbox {0} as {1} in {2} ms: {3}",
        parentId,
        child,
        (System.nanoTime() - fork.started) / 1_000_000,
        fork.copied ? "processes copied" : "files only (" + fork.reason + ")");
    return fork.copied
        ? new Forked(child, true, "", fork.notCarried)
        : new Forked(child, false, fork.reason, List.of());
  }

  /**
   * What a fork made: the child's id; whether its processes were copied, and if not why; what a
   * live copy could not carry (see {@code ForkResult}, which the API makes of it).
   */
  public record Forked(
      String id, boolean processesCopied, String reason, List<String> notCarried) {}

  /**
   * What a part of the engine above this one keeps in a sandbox's directory and hands on to a fork
   * (the port proxy's token, say): called with the parent's and the fork's directories while the
   * fork is being made.
   */
  @FunctionalInterface
  public interface Inherit {
    void from(Path parentDir, Path forkDir) throws IOException;
  }

  /**
   * The making of a fork's writable layer and, for a live fork, of the images its container is
   * restored from (in {@value #FORK_IMAGES}, deleted once restored). Runs under the fork's lock,
   * its record saying {@code CREATING}: a crash leaves it for gc; the parent's part holds the
   * parent's lock and, while it is frozen, has its record say {@code SUSPENDED}.
   */
  private final class Fork implements Engine.UpperLayer {
    final String parentId;
    final Optional<String> unavailable;
    final Inherit inherit;
    final long started = System.nanoTime();
    boolean copied;
    String reason = "";
    List<String> notCarried = List.of();
    Path images; // set once there are images to restore from

    Fork(String parentId, Optional<String> unavailable, Inherit inherit) {
      this.parentId = parentId;
      this.unavailable = unavailable;
      this.inherit = inherit;
    }

    @Override
    public void prepare(Path dir, String id) throws IOException {
      Path upper = SandboxDisk.upper(dir); // on the fork's own disk: the copy counts against it
      Path forkImages = dir.resolve(FORK_IMAGES);
      int childBase = SandboxRecord.read(dir.resolve("state.json")).hostBase();
      locked(
          parentId,
          (parentDir, p) -> {
            // The copy is owned by the fork's own block of host ids, never its parent's.
            int parentBase = p.hostBase();
            Copier copyUpper = (from, to) -> copyTree(from, to, parentBase, childBase);
            if (unavailable.isPresent()) {
              reason = unavailable.get();
            } else if (p.status() == SandboxRecord.Status.RUNNING) {
              write(parentDir, p, SandboxRecord.Status.SUSPENDED); // thawed before RUNNING again
              try {
                notCarried =
                    Checkpoints.dumpLeavingRunning(
                            engine,
                            parentId,
                            forkImages,
                            () -> copyUpper.copy(SandboxDisk.upper(parentDir), upper))
                        .notCarried();
                images = forkImages;
                return null;
              } catch (WorkspaceException e) {
                reason = "the checkpoint of its processes failed: " + e.getMessage();
                Trees.delete(forkImages);
                Trees.delete(upper);
              } finally {
                write(parentDir, p, SandboxRecord.Status.RUNNING);
              }
            } else if (p.status() == SandboxRecord.Status.HIBERNATED
                && Files.isDirectory(parentDir.resolve(CHECKPOINT))) {
              copyUpper.copy(SandboxDisk.upper(parentDir), upper);
              copyTree(parentDir.resolve(CHECKPOINT), forkImages);
              images = forkImages;
              return null;
            } else {
              reason =
                  "local:"
                      + parentId
                      + " is "
                      + describe(p.status())
                      + ": it had no running processes to copy";
            }
            copyFrozen(parentDir, p, upper, copyUpper);
            return null;
          });
      Files.createDirectories(SandboxDisk.work(dir));
      Files.createDirectories(dir.resolve("rootfs"));
      renameHost(upper, parentId, id);
      Timers.inherit(engine.dir(parentId), dir);
      inherit.from(engine.dir(parentId), dir);
    }

    /** A files-only copy: the parent frozen meanwhile if it runs. */
    private void copyFrozen(Path parentDir, SandboxRecord p, Path upper, Copier copyUpper)
        throws IOException {
      boolean freeze = p.status() == SandboxRecord.Status.RUNNING;
      if (freeze) {
        write(parentDir, p, SandboxRecord.Status.SUSPENDED);
        Freezer.freeze(engine.cgroups(), parentId);
      }
      try {
        copyUpper.copy(SandboxDisk.upper(parentDir), upper);
      } finally {
        if (freeze) {
          Freezer.thaw(engine.cgroups(), parentId);
          write(parentDir, p, SandboxRecord.Status.RUNNING);
        }
      }
    }

    @Override
    public void start(Engine e, Path dir, String id, Image image, OciConfig.Limits limits)
        throws IOException {
      if (images == null) {
        e.start(dir, id, image, limits);
        return;
      }
      try {
        Checkpoints.restore(e, id, images);
        copied = true;
      } catch (WorkspaceException failed) {
        reason = "the restore of its processes failed: " + failed.getMessage();
        e.runtimeOf(id).delete(id);
        e.start(dir, id, image, limits);
      } finally {
        Trees.delete(images);
      }
    }
  }

  /** The most of a fork's {@code /etc/hostname} or {@code /etc/hosts} that is renamed. */
  private static final int MAX_HOST_FILE = 1 << 20;

  /**
   * The fork is called {@code child}: its {@code /etc/hostname} and {@code /etc/hosts} say so. Each
   * is replaced atomically, with its owner and mode, in the fork's writable layer {@code upper}
   * (which nothing runs on yet), through a {@link Beneath} handle. They are the sandbox's own
   * files: if it made {@code /etc} or one of them a symlink (to anywhere), a FIFO, a device or a
   * file of over 1 MiB, that one is left as the copy has it (the log says so), never followed or
   * opened. The fork's hostname is set by the engine either way.
   */
  static void renameHost(Path upper, String parent, String child) throws IOException {
    Pattern word = Pattern.compile("\\b" + Pattern.quote(parent) + "\\b");
    try (Beneath layer = Beneath.open(upper)) {
      for (String name : List.of("etc/hostname", "etc/hosts")) {
        try {
          Optional<NativeFs.Stat> st = layer.lstat(name);
          Optional<byte[]> content = layer.read(name, MAX_HOST_FILE);
          if (st.isEmpty() || content.isEmpty()) {
            continue;
          }
          String text = new String(content.get(), StandardCharsets.UTF_8);
          String renamed = word.matcher(text).replaceAll(Matcher.quoteReplacement(child));
          if (!renamed.equals(text)) {
            layer.replace(
                name,
                renamed.getBytes(StandardCharsets.UTF_8),
                st.get().mode(),
                st.get().uid(),
                st.get().gid());
          }
        } catch (Beneath.Refused e) {
          LOG.log(
              System.Logger.Level.WARNING,
              "fork local:{0} keeps /{1} as its parent had it: {2}",
              child,
              name,
              e.getMessage());
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
  public Image snapshot(String id, String name) {
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
                images.pin(build, images.ofLayers(record.image(), record.layerIds()));
                // Back to the canonical ids every layer of the store has (IdBlocks).
                copyTree(SandboxDisk.upper(dir), layer, record.hostBase(), Image.UID_SHIFT);
                return null;
              });
          SandboxRecord record = saved[0];
          RecipeBuild.dropSandboxOwnFiles(layer);
          long size = RootfsOwnership.sizeOf(layer) + baseSize;
          byte[] random = new byte[32];
          RANDOM.nextBytes(random);
          String layerId = ImageStore.sha256Hex(random);
          images.addLayer(build, layer, layerId);
          List<String> layers = new ArrayList<>(record.layerIds());
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
                      id,
                      record.image(),
                      record.cpus(),
                      record.memoryBytes(),
                      record.pids(),
                      Networks.networksOf(engine.dir(id)),
                      record.diskBytes(),
                      record.diskInodes(),
                      record.identity().isSeed() ? null : record.identity().toConfig()));
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
          .filter(i -> i.layerIds().equals(record.layerIds()))
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
   * Copies the tree {@code from} (a writable layer the sandbox controls) to {@code to}, which must
   * not exist: see {@link Trees#copy}.
   */
  public static void copyTree(Path from, Path to) {
    copyTree(from, to, 0, 0);
  }

  /** A copy of one writable layer to another place. */
  private interface Copier {
    void copy(Path from, Path to);
  }

  /**
   * {@link #copyTree(Path, Path)} with the owners shifted from the block of host ids at {@code
   * fromBase} to the one at {@code toBase} (see {@link Trees#copy(Path, Path, int, int)}).
   */
  public static void copyTree(Path from, Path to, int fromBase, int toBase) {
    try {
      // A sandbox's disk starts with an empty upper directory: the copy makes it anew, with the
      // source's owner, mode and overlay xattrs (a non-empty one is an error, never merged into).
      Files.deleteIfExists(to);
      Trees.copy(from, to, fromBase, toBase);
    } catch (IOException e) {
      throw new WorkspaceException(e.getMessage(), e);
    }
  }

  private static String describe(SandboxRecord.Status status) {
    return switch (status) {
      case CREATING -> "being created (or was interrupted: `sandbox4j gc` removes it)";
      case DESTROYING -> "being destroyed";
      default -> status.name().toLowerCase(Locale.ROOT);
    };
  }
}
