package dev.sandbox4j.runtime.internal.image;

import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The locks of one image store, across threads and JVMs: the store lock ({@code .lock}), which
 * guards what uses which layer, and one build lock per image name ({@code .lock-<name>}), which
 * builders, importers and removers of that name hold. Lock files are never deleted (see {@link
 * ImageStore}). Lock order: a name's lock, then a sandbox's lock, then the store lock.
 */
final class StoreLocks {
  /**
   * File locks belong to the process, not the thread: a second {@code FileChannel.lock()} on the
   * same file from this JVM throws instead of waiting. So threads queue here first, keyed by the
   * lock file's real path.
   */
  private static final ConcurrentHashMap<Path, ReentrantLock> JVM_LOCKS = new ConcurrentHashMap<>();

  /** The store locks this thread holds (by real path), so that holding one again is a no-op. */
  private static final ThreadLocal<Set<Path>> HELD_STORE_LOCKS =
      ThreadLocal.withInitial(HashSet::new);

  private final Path imagesDir;

  StoreLocks(Path imagesDir) {
    this.imagesDir = imagesDir;
  }

  /** What runs under a lock. */
  interface LockedAction<T> {
    T run() throws IOException;
  }

  /**
   * Runs {@code action} holding the store lock, which guards what uses which layer. Reentrant: a
   * thread that holds it already just runs the action.
   */
  <T> T withStoreLock(LockedAction<T> action) {
    Path lockFile;
    try {
      PrivateFiles.createPrivateDirectories(imagesDir);
      lockFile = imagesDir.toRealPath().resolve(StoreLayout.STORE_LOCK);
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

  /** Runs {@code action} holding image {@code name}'s build lock, waiting for it if need be. */
  <T> T withLock(String name, LockedAction<T> action) {
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
  void tryWithLock(String name, LockedAction<?> action) {
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

  /** Whether someone (this thread included) holds {@code name}'s lock at this moment. */
  boolean isHeld(String name) {
    boolean[] free = new boolean[1];
    tryWithLock(
        name,
        () -> {
          free[0] = true;
          return null;
        });
    return !free[0];
  }

  private Path lockFile(String name) {
    try {
      PrivateFiles.createPrivateDirectories(imagesDir);
      // The real path: two stores reaching one directory by different paths share JVM locks.
      return imagesDir.toRealPath().resolve(StoreLayout.LOCK_PREFIX + name);
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
}
