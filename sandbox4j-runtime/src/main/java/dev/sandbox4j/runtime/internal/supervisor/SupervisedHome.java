package dev.sandbox4j.runtime.internal.supervisor;

import dev.sandbox4j.runtime.internal.util.FileLock;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Objects;
import java.util.Optional;

/**
 * The state directory a {@link Supervisor} was started for, pinned by identity: the directory's
 * inode (kept open, so that its number cannot be reused by a new directory while the supervisor
 * runs) and the inode of the {@code supervisor.lock} it holds.
 *
 * <p>Why: a supervisor that outlived its home used to recreate entries in it (its lock, {@code
 * network/}, the proxy's port file) while a test or a user was deleting it, so that the deletion
 * failed, or a whole home came back. A supervisor asks {@link #gone} before every step that may
 * write into the home and exits once it answers. The lock file is part of the identity: whoever
 * deletes a home deletes it first or soon, and a lock whose file was deleted no longer keeps a
 * second supervisor out, so this one must not go on in any case.
 *
 * <p>The check and a later write are not atomic: a deletion that starts between them can still meet
 * one entry, written by a step already under way. Tests therefore stop a home's supervisor and wait
 * for it to exit before they delete the home ({@code TestImages.destroyAllAndDelete}). Not
 * thread-safe; the supervisor's scan loop is its only user.
 */
final class SupervisedHome implements AutoCloseable {
  private final Path home;
  private final Object homeKey;
  private final FileChannel held;
  private final Object lockKey;

  private SupervisedHome(Path home, Object homeKey, FileChannel held, Object lockKey) {
    this.home = home;
    this.homeKey = homeKey;
    this.held = held;
    this.lockKey = lockKey;
  }

  /**
   * Pins {@code home} as it is now, with {@code lock} (held on its {@code supervisor.lock}). Fails
   * with {@link NoSuchFileException} if the home is gone already.
   */
  static SupervisedHome pin(Path home, FileLock lock) throws IOException {
    FileChannel held = FileChannel.open(home, StandardOpenOption.READ);
    try {
      Object key = identity(home).orElseThrow(() -> new NoSuchFileException(home.toString()));
      return new SupervisedHome(home, key, held, Objects.requireNonNull(lock.identity()));
    } catch (IOException | RuntimeException e) {
      held.close();
      throw e;
    }
  }

  /**
   * Why this is no longer the home the supervisor was started for (deleted, replaced, or its lock
   * file deleted); empty while it still is. A home that cannot be read for another reason counts as
   * there: a passing I/O error must not end the supervision of live sandboxes.
   */
  Optional<String> gone() {
    try {
      Optional<Object> now = identity(home);
      if (now.isEmpty() || !now.get().equals(homeKey)) {
        return Optional.of("its home " + home + " was deleted or replaced");
      }
      Optional<Object> lock = identity(home.resolve(Supervisor.LOCK));
      if (lock.isEmpty() || !lock.get().equals(lockKey)) {
        return Optional.of(
            "its lock file " + home.resolve(Supervisor.LOCK) + " was deleted (the home is going)");
      }
      return Optional.empty();
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /** The inode of {@code path} itself (a symlink is not followed); empty if there is none. */
  private static Optional<Object> identity(Path path) throws IOException {
    try {
      BasicFileAttributes a =
          Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
      return Optional.of(a.fileKey() != null ? a.fileKey() : path.toRealPath());
    } catch (NoSuchFileException e) {
      return Optional.empty();
    }
  }

  @Override
  public void close() throws IOException {
    held.close();
  }
}
