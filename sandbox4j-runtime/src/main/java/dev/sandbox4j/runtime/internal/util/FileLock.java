package dev.sandbox4j.runtime.internal.util;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;

/**
 * An exclusive lock shared by threads and processes: a one-permit {@link Semaphore} per file within
 * this JVM (a second {@code FileChannel.lock()} of one file from the same JVM throws instead of
 * waiting), then an OS file lock across JVMs. A lock dies with its process, so a JVM killed while
 * holding one never blocks the next.
 *
 * <p>A lock belongs to this JVM, not to the thread that took it: another thread may close it (a
 * warm pool's member is created, and its lock taken, by the pool's thread; the thread that claims
 * it finishes the create and releases the lock). It is not reentrant: a thread that waits for a
 * lock it took itself and still holds gets an {@link IllegalStateException} instead of waiting
 * forever.
 *
 * <p>Files are told apart by identity (device and inode), not by path, so a lock taken before its
 * directory was renamed is still the same lock under the new name. The in-JVM locks are counted and
 * dropped when unused.
 */
public final class FileLock implements AutoCloseable {
  private static final ConcurrentHashMap<Object, Shared> JVM_LOCKS = new ConcurrentHashMap<>();

  /** A JVM-wide lock and how many threads hold or wait for it. Guarded by the map's compute. */
  private static final class Shared {
    final Semaphore lock = new Semaphore(1);

    /** The thread that took the lock, while it is held (the thread that closes it may differ). */
    volatile Thread holder;

    int users;
  }

  private final Object key;
  private final Shared shared;
  private final FileChannel channel;
  private final java.nio.channels.FileLock osLock;
  private final java.util.concurrent.atomic.AtomicBoolean closed =
      new java.util.concurrent.atomic.AtomicBoolean();

  private FileLock(Object key, Shared shared, FileChannel channel, java.nio.channels.FileLock os) {
    this.key = key;
    this.shared = shared;
    this.channel = channel;
    this.osLock = os;
    shared.holder = Thread.currentThread();
  }

  /** Waits for the lock on {@code file}, creating the file if needed. */
  public static FileLock acquire(Path file) throws IOException {
    Opened o = Opened.of(file);
    if (o.shared.holder == Thread.currentThread()) {
      o.close();
      throw new IllegalStateException("this thread holds the lock on " + file + " already");
    }
    o.shared.lock.acquireUninterruptibly();
    try {
      return new FileLock(o.key, o.shared, o.channel, o.channel.lock());
    } catch (IOException | RuntimeException e) {
      o.shared.lock.release();
      o.close();
      throw e;
    }
  }

  /** The lock on {@code file} if nobody holds it now; empty otherwise. */
  public static Optional<FileLock> tryAcquire(Path file) throws IOException {
    return tryAcquire(Opened.of(file, true));
  }

  /**
   * {@link #tryAcquire}, but never creates {@code file}: {@link java.nio.file.NoSuchFileException}
   * if it does not exist (for a process that must not recreate anything in a directory someone is
   * deleting).
   */
  public static Optional<FileLock> tryAcquireExisting(Path file) throws IOException {
    return tryAcquire(Opened.of(file, false));
  }

  private static Optional<FileLock> tryAcquire(Opened o) throws IOException {
    if (!o.shared.lock.tryAcquire()) {
      o.close();
      return Optional.empty();
    }
    try {
      java.nio.channels.FileLock os = o.channel.tryLock();
      if (os != null) {
        return Optional.of(new FileLock(o.key, o.shared, o.channel, os));
      }
    } catch (IOException | RuntimeException e) {
      o.shared.lock.release();
      o.close();
      throw e;
    }
    o.shared.lock.release();
    o.close();
    return Optional.empty();
  }

  /** The open lock file and this JVM's lock for it, not yet locked. */
  private record Opened(Object key, Shared shared, FileChannel channel) {
    static Opened of(Path file) throws IOException {
      return of(file, true);
    }

    static Opened of(Path file, boolean create) throws IOException {
      FileChannel channel =
          create
              ? FileChannel.open( // owner-only, like everything in the state directory
                  file,
                  java.util.Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE),
                  PrivateFiles.privateFile())
              : FileChannel.open(file, StandardOpenOption.WRITE);
      try {
        Object key = identity(file);
        return new Opened(key, use(key), channel);
      } catch (IOException | RuntimeException e) {
        channel.close();
        throw e;
      }
    }

    /** Gives up this JVM's claim and closes the file. */
    void close() throws IOException {
      release(key);
      channel.close();
    }
  }

  private static Object identity(Path file) throws IOException {
    Object key = Files.readAttributes(file, BasicFileAttributes.class).fileKey();
    return key != null ? key : file.toRealPath();
  }

  private static Shared use(Object key) {
    return JVM_LOCKS.compute(
        key,
        (k, s) -> {
          Shared shared = s != null ? s : new Shared();
          shared.users++;
          return shared;
        });
  }

  private static void release(Object key) {
    JVM_LOCKS.computeIfPresent(key, (k, s) -> --s.users == 0 ? null : s);
  }

  /** The locked file's identity (device and inode), as {@link BasicFileAttributes#fileKey}. */
  public Object identity() {
    return key;
  }

  @Override
  public void close() throws IOException {
    if (closed.getAndSet(true)) {
      return; // a second release would let two holders in
    }
    shared.holder = null;
    try {
      osLock.release();
      channel.close();
    } finally {
      shared.lock.release();
      release(key);
    }
  }
}
