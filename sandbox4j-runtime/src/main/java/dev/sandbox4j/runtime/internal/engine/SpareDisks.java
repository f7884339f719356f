package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.LoopDisk;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Sandbox disks made ahead of the creates that need them, so that a create claims one instead of
 * paying for a loop device and an ext4 mount (about 10 ms quiet, tens under load) on its path.
 *
 * <p><b>What a spare is.</b> A fresh sparse copy of the template for one {@link SandboxDisk.Limit}
 * in {@code disks/spare-<random>.img} (0600 in the 0700 {@code disks/}, as a sandbox's own image),
 * mounted through its loop device but attached nowhere: a detached mount ({@code fsmount}) whose
 * descriptor only this JVM holds. A create claims one by renaming the image into the new sandbox's
 * directory and attaching the mount at its {@code disk/} ({@code move_mount}): a rename and a
 * system call. A spare is made from the template only, never from a disk a sandbox used, and is
 * claimed once: no sandbox ever sees another's data.
 *
 * <p><b>Lifetime.</b> Spares belong to the JVM that made them. The detached mounts cannot leak: the
 * kernel unmounts them and frees their loop devices when their descriptors close, at the latest
 * when the JVM ends, however it ends. The image files are named (so that a sandbox's disk shows its
 * path in {@code losetup}); each is locked ({@code flock}) by its maker until claimed, a JVM that
 * exits normally deletes its unclaimed ones, and {@code gc} deletes those of a JVM that died
 * ({@link #gc}: unlocked).
 *
 * <p><b>How many.</b> {@value #DEFAULT_PER_SIZE} per home and size that this JVM has created a
 * sandbox with (system property {@code sandbox4j.spareDisks}; 0 turns spares off), refilled in the
 * background after each claim. The first create of a size in a JVM makes its disk on its own path,
 * as does a create in a short-lived JVM (the CLI). A spare costs a loop device and about 400 KB of
 * the home's file system. Spares are made only while the size's template exists and into the
 * existing {@code disks/}: making one never recreates a deleted home.
 */
public final class SpareDisks {
  private SpareDisks() {}

  public static final String PREFIX = "spare-";
  static final int DEFAULT_PER_SIZE = 2;
  private static final System.Logger LOG = System.getLogger(SpareDisks.class.getName());

  private record Key(Path home, SandboxDisk.Limit limit) {}

  /** A made spare: its image, the open file whose lock marks it in use, its detached mount. */
  private record Spare(Path image, FileChannel locked, int mount) {}

  private static final class Pool {
    public final Queue<Spare> ready = new ConcurrentLinkedQueue<>();
    final AtomicInteger making = new AtomicInteger();
  }

  private static final Map<Key, Pool> POOLS = new ConcurrentHashMap<>();

  /**
   * The spare images this JVM holds or is making. Its own {@link #gc} never opens them: closing any
   * descriptor of a file drops every POSIX lock the process holds on it.
   */
  private static final Set<Path> OURS = ConcurrentHashMap.newKeySet();

  /** Makes spares one at a time, on a platform thread (the mounts block in native code). */
  private static final ExecutorService MAKER =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "sandbox4j-spare-disks");
            t.setDaemon(true);
            return t;
          });

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  // The kernel unmounts the detached mounts as the JVM ends; their files go now.
                  for (Pool pool : POOLS.values()) {
                    for (Spare s : pool.ready) {
                      try {
                        Files.deleteIfExists(s.image());
                      } catch (IOException | RuntimeException e) {
                        // gc deletes it
                      }
                    }
                  }
                },
                "sandbox4j-spare-disks-exit"));
  }

  public static int perSize() {
    return Math.max(0, Integer.getInteger("sandbox4j.spareDisks", DEFAULT_PER_SIZE));
  }

  /**
   * Gives the new sandbox in {@code dir} a spare disk for {@code limit}, if one is ready: its image
   * becomes {@code dir/disk.img} and its mount {@code dir/disk}. Returns whether it did (else the
   * caller makes the disk itself). Starts making spares for this home and size either way.
   */
  static boolean claim(Path home, SandboxDisk.Limit limit, Path dir) {
    if (perSize() == 0) {
      return false;
    }
    Pool pool = POOLS.computeIfAbsent(new Key(home, limit), k -> new Pool());
    try {
      for (Spare s; (s = pool.ready.poll()) != null; ) {
        if (claim(s, dir)) {
          return true;
        }
      }
      return false;
    } finally {
      refill(home, limit, pool);
    }
  }

  private static boolean claim(Spare s, Path dir) {
    Path image = dir.resolve(SandboxDisk.IMAGE);
    try {
      Files.move(s.image(), image, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) { // its file was deleted (its home with it, say): not usable
      discard(s);
      return false;
    } finally {
      OURS.remove(s.image());
    }
    try {
      Path target = Files.createDirectories(dir.resolve(SandboxDisk.MOUNT));
      LoopDisk.attach(s.mount(), target);
    } catch (IOException | LoopDisk.Failure e) {
      LOG.log(System.Logger.Level.WARNING, "cannot attach a spare disk in " + dir + ": " + e);
      // The caller makes a new image: this one goes, its mount unmounted off this path.
      discard(new Spare(image, s.locked(), s.mount()));
      return false;
    }
    LoopDisk.close(s.mount()); // attached, the mount lives on without the descriptor
    closeQuietly(s.locked());
    return true;
  }

  private static void refill(Path home, SandboxDisk.Limit limit, Pool pool) {
    int wanted = perSize();
    while (pool.ready.size() + pool.making.get() < wanted) {
      pool.making.incrementAndGet();
      try {
        MAKER.execute(
            () -> {
              try {
                make(home, limit).ifPresent(pool.ready::add);
              } finally {
                pool.making.decrementAndGet();
              }
            });
      } catch (java.util.concurrent.RejectedExecutionException e) {
        pool.making.decrementAndGet();
        return;
      }
    }
  }

  private static Optional<Spare> make(Path home, SandboxDisk.Limit limit) {
    Path template = SandboxDisk.templatePath(home, limit);
    if (!Files.exists(template)) {
      return Optional.empty(); // made by the first create of this size; or the home is gone
    }
    Path image = template.resolveSibling(PREFIX + Engine.newId() + ".img");
    FileChannel locked = null;
    OURS.add(image);
    try {
      locked =
          FileChannel.open(
              image,
              Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
              PrivateFiles.privateFile());
      locked.lock(); // new and ours: taken at once; marks it in use for gc
      LoopDisk.sparseCopyInto(template, image);
      int mount = SandboxDisk.mountDetached(image);
      try {
        // As SandboxDisk.create makes them; made here, the file system's first allocations (its
        // block bitmap read through the loop device) are off the create's path too.
        LoopDisk.mkdirAt(mount, "upper");
        LoopDisk.mkdirAt(mount, "work");
      } catch (LoopDisk.Failure e) {
        Release.close(mount);
        throw e;
      }
      return Optional.of(new Spare(image, locked, mount));
    } catch (NoSuchFileException e) {
      closeQuietly(locked);
      OURS.remove(image);
      return Optional.empty(); // its home is being deleted
    } catch (IOException | LoopDisk.Failure | RuntimeException e) {
      closeQuietly(locked);
      OURS.remove(image);
      try {
        Files.deleteIfExists(image);
      } catch (IOException ignored) {
        // gc deletes it
      }
      LOG.log(System.Logger.Level.WARNING, "cannot make a spare disk in " + home + ": " + e);
      return Optional.empty();
    }
  }

  private static void discard(Spare s) {
    Release.close(s.mount());
    try {
      Files.deleteIfExists(s.image());
    } catch (IOException e) {
      // gc deletes it
    }
    closeQuietly(s.locked());
    OURS.remove(s.image());
  }

  /**
   * Discards this JVM's spares of {@code home}, and waits until their mounts are gone: for a home
   * about to be deleted (tests), so that nothing of it stays mounted.
   */
  public static void drop(Path home) {
    POOLS.entrySet().stream()
        .filter(e -> e.getKey().home().equals(home))
        .map(Map.Entry::getKey)
        .toList()
        .forEach(
            key -> {
              Pool pool = POOLS.remove(key);
              if (pool != null) {
                for (Spare s; (s = pool.ready.poll()) != null; ) {
                  discard(s);
                }
              }
            });
    try {
      MAKER.submit(() -> {}).get(); // one being made lands in a pool no longer listed
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException(e);
    }
    for (Pool pool : List.copyOf(POOLS.values())) {
      pool.ready.removeIf(
          s -> {
            if (s.image().startsWith(home)) {
              discard(s);
              return true;
            }
            return false;
          });
    }
    Release.await();
  }

  /** The spare images this JVM holds or is making now (other processes may have their own). */
  public static Set<Path> ours() {
    return Set.copyOf(OURS);
  }

  /** This JVM's unclaimed spares (of every home): for tests. */
  public static int ready() {
    return POOLS.values().stream().mapToInt(p -> p.ready.size()).sum();
  }

  /**
   * Deletes the spare images in {@code home/disks} that nobody holds: left by a JVM that died
   * (their mounts went with it). Returns what it removed.
   */
  static List<String> gc(Path home) {
    List<String> removed = new ArrayList<>();
    Path dir = home.resolve(SandboxDisk.TEMPLATES);
    if (!Files.isDirectory(dir)) {
      return removed;
    }
    try (var files = Files.list(dir)) {
      for (Path f :
          files
              .filter(p -> p.getFileName().toString().startsWith(PREFIX) && !OURS.contains(p))
              .toList()) {
        try (FileChannel c = FileChannel.open(f, StandardOpenOption.WRITE)) {
          if (c.tryLock() != null) {
            Files.deleteIfExists(f);
            removed.add("spare disk " + f.getFileName() + " of a process that ended");
          }
        } catch (OverlappingFileLockException ours) {
          // this JVM's: in use
        } catch (NoSuchFileException claimedMeanwhile) {
          // renamed into a sandbox
        }
      }
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "gc cannot read " + dir + ": " + e);
    }
    return removed;
  }

  private static void closeQuietly(FileChannel c) {
    if (c != null) {
      try {
        c.close();
      } catch (IOException ignored) {
        // nothing to do about it
      }
    }
  }

  /**
   * Closes the descriptors of detached mounts off the callers' paths: the real unmount (journal
   * flushed, loop device freed, a deleted image's blocks released) takes 50 to 300 ms here.
   */
  public static final class Release {
    private Release() {}

    private static final AtomicInteger PENDING = new AtomicInteger();
    private static final ExecutorService CLOSER =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "sandbox4j-disk-release");
              t.setDaemon(true); // an exit closes what is left: the kernel unmounts it then
              return t;
            });

    static void close(int mount) {
      PENDING.incrementAndGet();
      try {
        CLOSER.execute(
            () -> {
              try {
                LoopDisk.close(mount);
              } finally {
                PENDING.decrementAndGet();
              }
            });
      } catch (java.util.concurrent.RejectedExecutionException e) {
        PENDING.decrementAndGet();
        LoopDisk.close(mount);
      }
    }

    /** Waits until every release handed over so far is done (tests, a home being deleted). */
    public static void await() {
      try {
        CLOSER.submit(() -> {}).get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (java.util.concurrent.ExecutionException e) {
        throw new IllegalStateException(e);
      }
    }

    public static int pending() {
      return PENDING.get();
    }
  }
}
