package dev.sandbox4j.docker;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Supplier;

/**
 * Pausing a sandbox never overlaps an exec starting in it, across threads and processes. Pausing a
 * container while an exec is starting in it can leave it frozen for good on Docker 20.10 with
 * cgroup v1 (the exec's process freezes half set up; removing the container then hangs too): seen
 * once, by the server's tests, during a snapshot.
 *
 * <p>Per sandbox, a starting exec holds the lock shared and a pause (a suspend, the commit of a
 * snapshot or fork, the supervisor's auto-suspend) exclusively. Within this JVM that is a
 * read-write lock per sandbox; between processes (the supervisor is one) a POSIX record lock on
 * {@value #FILE} in the sandbox's directory of the {@link DockerHome}: each starting exec locks a
 * byte of its own shared, a pause the whole file exclusively. A sandbox with no directory there (no
 * timers, no egress network) has no supervisor to pause it, and only this JVM's lock counts.
 */
final class PauseLock {
  static final String FILE = "pause.lock";

  /**
   * A sandbox's lock in this JVM: the read-write lock, and the one channel on its file that every
   * thread here locks through. One channel, open while any thread uses it: closing any descriptor
   * of a file drops every POSIX lock the process holds on it, another thread's included.
   */
  private static final class Entry {
    final ReentrantReadWriteLock threads = new ReentrantReadWriteLock();
    private FileChannel channel;
    private int users;

    /** The channel, opened if this is its first user; null if the sandbox has no directory. */
    synchronized FileChannel use(Path sandboxDir) throws IOException {
      if (channel == null || !channel.isOpen()) {
        channel = open(sandboxDir);
        if (channel == null) {
          return null;
        }
      }
      users++;
      return channel;
    }

    synchronized void done() throws IOException {
      if (--users == 0) {
        if (channel != null) {
          channel.close();
        }
        channel = null;
      }
    }
  }

  /** JVM-wide, so that no shared byte of this JVM is held while this JVM locks the whole file. */
  private static final Map<String, Entry> ENTRIES = new ConcurrentHashMap<>();

  /** The next byte a starting exec of this JVM locks: distinct, as the JDK requires in one JVM. */
  private static final AtomicLong NEXT_BYTE = new AtomicLong();

  private PauseLock() {}

  private static Entry of(Path sandboxDir) {
    return ENTRIES.computeIfAbsent(sandboxDir.toString(), k -> new Entry());
  }

  /** Forgets a removed sandbox's lock. */
  static void forget(Path sandboxDir) {
    ENTRIES.remove(sandboxDir.toString());
  }

  /** Runs {@code start} (which starts an exec in the sandbox) while no pause runs. */
  static <T> T execStarting(Path sandboxDir, Supplier<T> start) {
    Entry entry = of(sandboxDir);
    var threads = entry.threads.readLock();
    threads.lock();
    try {
      FileChannel file = entry.use(sandboxDir);
      if (file == null) {
        return start.get();
      }
      try {
        long at = NEXT_BYTE.getAndIncrement() & (Long.MAX_VALUE >> 1);
        java.nio.channels.FileLock shared = lock(file, at, 1, true);
        try {
          return start.get();
        } finally {
          release(shared);
        }
      } finally {
        entry.done();
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot lock " + sandboxDir.resolve(FILE) + ": " + e, e);
    } finally {
      threads.unlock();
    }
  }

  /** Runs {@code pause} (which pauses the sandbox) while no exec starts in it; waits for them. */
  static <T> T pausing(Path sandboxDir, Supplier<T> pause) {
    Entry entry = of(sandboxDir);
    var threads = entry.threads.writeLock();
    threads.lock();
    try {
      FileChannel file = entry.use(sandboxDir);
      if (file == null) {
        return pause.get();
      }
      try {
        java.nio.channels.FileLock exclusive = lock(file, 0, Long.MAX_VALUE, false);
        try {
          return pause.get();
        } finally {
          release(exclusive);
        }
      } finally {
        entry.done();
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot lock " + sandboxDir.resolve(FILE) + ": " + e, e);
    } finally {
      threads.unlock();
    }
  }

  /**
   * Runs {@code pause} if no exec is starting in the sandbox right now (the supervisor's
   * auto-suspend: it waits for nobody, and tries again at its next pass); false if one is.
   */
  static boolean tryPausing(Path sandboxDir, Pause pause) throws IOException {
    Entry entry = of(sandboxDir);
    var threads = entry.threads.writeLock();
    if (!threads.tryLock()) {
      return false;
    }
    try {
      FileChannel file = entry.use(sandboxDir);
      if (file == null) {
        pause.run();
        return true;
      }
      try {
        java.nio.channels.FileLock exclusive = tryLock(file, 0, Long.MAX_VALUE, false);
        if (exclusive == null) {
          return false;
        }
        try {
          pause.run();
          return true;
        } finally {
          release(exclusive);
        }
      } finally {
        entry.done();
      }
    } finally {
      threads.unlock();
    }
  }

  // A FileChannel is interruptible: an I/O call on it from a thread whose interrupt flag is set
  // (a cancelled command's, often) closes the channel, which drops every lock this process holds
  // on the file, other threads' too (seen: an exec's lock release failing with
  // ClosedChannelException). So the channel is only ever touched with the flag cleared (and set
  // again after), never in a blocking call: waiting is a sleep between tries, which an interrupt
  // ends without touching the channel.

  private static final long RETRY_MILLIS = 2;

  /** Locks the region, waiting for other processes' locks; CancellationException if interrupted. */
  private static java.nio.channels.FileLock lock(
      FileChannel file, long position, long size, boolean shared) throws IOException {
    while (true) {
      java.nio.channels.FileLock lock = tryLock(file, position, size, shared);
      if (lock != null) {
        return lock;
      }
      try {
        Thread.sleep(RETRY_MILLIS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.util.concurrent.CancellationException(
            "interrupted while waiting for a pause of the sandbox to end");
      }
    }
  }

  private static java.nio.channels.FileLock tryLock(
      FileChannel file, long position, long size, boolean shared) throws IOException {
    boolean interrupted = Thread.interrupted();
    try {
      return file.tryLock(position, size, shared);
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static void release(java.nio.channels.FileLock lock) throws IOException {
    boolean interrupted = Thread.interrupted();
    try {
      lock.release();
    } catch (java.nio.channels.ClosedChannelException gone) {
      // the channel closed under it (see above): the lock went with it
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A pause that may fail as the daemon's socket does. */
  interface Pause {
    void run() throws IOException;
  }

  /** The lock file, made if missing, or null if the sandbox has no directory in the home. */
  private static FileChannel open(Path sandboxDir) throws IOException {
    if (!Files.isDirectory(sandboxDir, LinkOption.NOFOLLOW_LINKS)) {
      return null;
    }
    try {
      return FileChannel.open(
          sandboxDir.resolve(FILE),
          StandardOpenOption.CREATE,
          StandardOpenOption.READ,
          StandardOpenOption.WRITE,
          LinkOption.NOFOLLOW_LINKS);
    } catch (java.nio.file.NoSuchFileException removedMeanwhile) {
      return null;
    }
  }
}
