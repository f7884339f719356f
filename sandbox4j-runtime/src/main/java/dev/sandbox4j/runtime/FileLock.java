package dev.sandbox4j.runtime;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * An exclusive lock shared by threads and processes: a {@link ReentrantLock} per file within this
 * JVM (a second {@code FileChannel.lock()} of the same file from one JVM throws instead of
 * waiting), then an OS file lock across JVMs. A lock dies with its process, so a JVM killed while
 * holding one never blocks the next.
 */
final class FileLock implements AutoCloseable {
  private static final ConcurrentHashMap<Path, ReentrantLock> JVM_LOCKS = new ConcurrentHashMap<>();

  private final ReentrantLock jvmLock;
  private final FileChannel channel;
  private final java.nio.channels.FileLock osLock;

  private FileLock(ReentrantLock jvmLock, FileChannel channel, java.nio.channels.FileLock osLock) {
    this.jvmLock = jvmLock;
    this.channel = channel;
    this.osLock = osLock;
  }

  /** Waits for the lock on {@code file}, creating the file if needed. */
  static FileLock acquire(Path file) throws IOException {
    ReentrantLock jvm =
        JVM_LOCKS.computeIfAbsent(file.toAbsolutePath().normalize(), f -> new ReentrantLock());
    jvm.lock();
    try {
      FileChannel channel = open(file);
      try {
        return new FileLock(jvm, channel, channel.lock());
      } catch (IOException | RuntimeException e) {
        channel.close();
        throw e;
      }
    } catch (IOException | RuntimeException e) {
      jvm.unlock();
      throw e;
    }
  }

  /** The lock on {@code file} if nobody holds it now; empty otherwise. */
  static Optional<FileLock> tryAcquire(Path file) throws IOException {
    ReentrantLock jvm =
        JVM_LOCKS.computeIfAbsent(file.toAbsolutePath().normalize(), f -> new ReentrantLock());
    if (!jvm.tryLock()) {
      return Optional.empty();
    }
    try {
      FileChannel channel = open(file);
      java.nio.channels.FileLock os = channel.tryLock();
      if (os == null) {
        channel.close();
        jvm.unlock();
        return Optional.empty();
      }
      return Optional.of(new FileLock(jvm, channel, os));
    } catch (IOException | RuntimeException e) {
      jvm.unlock();
      throw e;
    }
  }

  private static FileChannel open(Path file) throws IOException {
    return FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
  }

  @Override
  public void close() throws IOException {
    try {
      osLock.release();
      channel.close();
    } finally {
      jvmLock.unlock();
    }
  }
}
