package dev.sandbox4j.runtime.internal.linux;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.Optional;

/**
 * A directory of a tree that a sandbox controls (its writable layer, a copy of it, a layer being
 * built), open on the host, and the few things the engine does to files below it. It is how the
 * engine touches a path in such a tree: never as a host path string.
 *
 * <p>The directory itself is the engine's (a path it made, opened once with {@code O_NOFOLLOW}).
 * Every path below it is resolved by {@code openat2(2)} relative to that descriptor with {@code
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV}: the kernel
 * refuses, atomically, any {@code ..} that would leave it, any symlink on the way (also the last
 * component), any {@code /proc} magic link and any mount. The engine never needs to follow a link
 * the sandbox made: a path that has one on the way is {@link Refused} (so is a parent that is a
 * file, and a target that is not a regular file: a FIFO, a device or a socket is never opened, so a
 * read cannot block). What a refusal then means is the caller's choice; none of them ever writes
 * through the link, so host files stay untouched.
 *
 * <p>A {@link #replace} is atomic as the engine's own files are: a new file in the same directory
 * (by descriptor), then {@code renameat} over the name. A symlink, FIFO or device at the name
 * itself is replaced, never followed or opened; one on the way to it is refused.
 *
 * <p>Not thread-safe; one handle per operation. Closing it closes the descriptor.
 */
public final class Beneath implements AutoCloseable {
  private static final long RESOLVE =
      NativeFs.RESOLVE_BENEATH
          | NativeFs.RESOLVE_NO_SYMLINKS
          | NativeFs.RESOLVE_NO_MAGICLINKS
          | NativeFs.RESOLVE_NO_XDEV;
  private static final SecureRandom RANDOM = new SecureRandom();

  /** A path below the directory that the engine does not follow or open: see the class comment. */
  public static final class Refused extends IOException {
    private static final long serialVersionUID = 1L;

    Refused(String message) {
      super(message);
    }
  }

  private final Path root;
  private int fd;

  private Beneath(Path root, int fd) {
    this.root = root;
    this.fd = fd;
  }

  /** Opens {@code root}, a directory the engine made (itself not a symlink). */
  public static Beneath open(Path root) throws IOException {
    try {
      return new Beneath(
          root,
          NativeFs.openat(
              NativeFs.AT_FDCWD,
              root.toString().getBytes(StandardCharsets.UTF_8),
              NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW,
              0));
    } catch (NativeFs.Errno e) {
      throw new IOException("cannot open " + root + ": " + e.getMessage());
    }
  }

  /** The descriptor of the directory, for {@link Trees#copy} and the like. */
  int fd() {
    return fd;
  }

  /**
   * What {@code path} (relative) is, not following it: empty if it does not exist.
   *
   * @throws Refused if a component on the way is a symlink or not a directory
   */
  public Optional<NativeFs.Stat> lstat(String path) throws IOException {
    Parent p = parent(path, false);
    if (p == null) {
      return Optional.empty();
    }
    try {
      return Optional.of(NativeFs.lstatAt(p.fd, p.name));
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT) {
        return Optional.empty();
      }
      throw failure("stat", path, e);
    } finally {
      NativeFs.close(p.fd);
    }
  }

  /**
   * The content of regular file {@code path}; empty if it does not exist.
   *
   * @throws Refused if it or a component on the way is a symlink, if it is not a regular file, or
   *     if it holds more than {@code max} bytes
   */
  public Optional<byte[]> read(String path, int max) throws IOException {
    int file;
    try {
      file = NativeFs.openat2(fd, bytes(path), NativeFs.O_PATH, 0, RESOLVE);
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT) {
        return Optional.empty();
      }
      throw failure("open", path, e);
    }
    try {
      NativeFs.Stat st = NativeFs.fstat(file);
      if (!st.isRegular()) {
        throw new Refused(where(path) + " is not a regular file: the engine does not open it");
      }
      if (st.size() > max) {
        throw new Refused(where(path) + " is larger than " + max + " bytes: not read");
      }
      // The same inode again, for reading: the O_PATH descriptor showed it is a regular file.
      int in =
          NativeFs.openat(
              NativeFs.AT_FDCWD,
              bytes("/proc/self/fd/" + file),
              NativeFs.O_RDONLY | NativeFs.O_NONBLOCK,
              0);
      try {
        byte[] content = DescriptorCalls.read(in, max + 1);
        if (content.length > max) {
          throw new Refused(where(path) + " is larger than " + max + " bytes: not read");
        }
        return Optional.of(content);
      } finally {
        NativeFs.close(in);
      }
    } catch (NativeFs.Errno e) {
      throw failure("read", path, e);
    } finally {
      NativeFs.close(file);
    }
  }

  /**
   * Replaces {@code path} atomically with a regular file holding {@code content}, with mode {@code
   * mode} and owner {@code uid:gid}: a new file in its directory, renamed over the name. Whatever
   * was at the name (a file, a symlink, a FIFO) is replaced, never followed.
   *
   * @throws Refused if a component on the way is a symlink or not a directory, or the name is a
   *     directory
   */
  public void replace(String path, byte[] content, int mode, int uid, int gid) throws IOException {
    Parent p = parent(path, true);
    byte[] temp =
        bytes(".sandbox4j-" + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36) + ".tmp");
    boolean renamed = false;
    try {
      int out =
          NativeFs.openat(
              p.fd,
              temp,
              NativeFs.O_WRONLY | NativeFs.O_CREAT | NativeFs.O_EXCL | NativeFs.O_NOFOLLOW,
              0600);
      try {
        DescriptorCalls.write(out, content);
        DescriptorCalls.fchown(out, uid, gid);
        NativeFs.fchmod(out, mode & 07777); // after the chown, which clears setuid bits
      } finally {
        NativeFs.close(out);
      }
      try {
        if (NativeFs.lstatAt(p.fd, p.name).isDirectory()) {
          throw new Refused(where(path) + " is a directory: not replaced");
        }
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.ENOENT) {
          throw e;
        }
      }
      NativeFs.renameat(p.fd, temp, p.fd, p.name);
      renamed = true;
    } catch (NativeFs.Errno e) {
      throw failure("replace", path, e);
    } finally {
      if (!renamed) {
        try {
          NativeFs.unlinkat(p.fd, temp, 0);
        } catch (NativeFs.Errno ignored) {
          // never made
        }
      }
      NativeFs.close(p.fd);
    }
  }

  /**
   * Removes the file, symlink or empty directory {@code path} itself; nothing if it does not exist.
   *
   * @throws Refused if a component on the way is a symlink or not a directory
   */
  public void remove(String path) throws IOException {
    Parent p = parent(path, false);
    if (p == null) {
      return;
    }
    try {
      NativeFs.Stat st = NativeFs.lstatAt(p.fd, p.name);
      NativeFs.unlinkat(p.fd, p.name, st.isDirectory() ? NativeFs.AT_REMOVEDIR : 0);
    } catch (NativeFs.Errno e) {
      if (e.errno != NativeFs.ENOENT) {
        throw failure("remove", path, e);
      }
    } finally {
      NativeFs.close(p.fd);
    }
  }

  /** Whether directory {@code path} (no symlink on the way) has no entries; false if missing. */
  public boolean isEmptyDirectory(String path) throws IOException {
    int dir;
    try {
      dir = NativeFs.openat2(fd, bytes(path), NativeFs.O_RDONLY | NativeFs.O_DIRECTORY, 0, RESOLVE);
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT) {
        return false;
      }
      throw failure("open", path, e);
    }
    try {
      return NativeFs.readDirectory(dir).isEmpty();
    } catch (NativeFs.Errno e) {
      throw failure("list", path, e);
    } finally {
      NativeFs.close(dir);
    }
  }

  @Override
  public void close() {
    NativeFs.close(fd);
    fd = -1;
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** A directory (open, beneath the root, no symlink on the way) and a name in it. */
  private record Parent(int fd, byte[] name) {}

  /**
   * The directory of {@code path} and its last name; null if the directory does not exist and
   * {@code mustExist} is false.
   */
  private Parent parent(String path, boolean mustExist) throws IOException {
    if (path.isEmpty() || path.startsWith("/") || path.endsWith("/")) {
      throw new IllegalArgumentException("not a relative path to a name: '" + path + "'");
    }
    int slash = path.lastIndexOf('/');
    String name = path.substring(slash + 1);
    if (name.equals(".") || name.equals("..")) {
      throw new IllegalArgumentException("not a relative path to a name: '" + path + "'");
    }
    String dir = slash < 0 ? "." : path.substring(0, slash);
    try {
      return new Parent(
          NativeFs.openat2(fd, bytes(dir), NativeFs.O_PATH | NativeFs.O_DIRECTORY, 0, RESOLVE),
          bytes(name));
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT && !mustExist) {
        return null;
      }
      throw failure("open", dir, e);
    }
  }

  private IOException failure(String what, String path, NativeFs.Errno e) {
    return switch (e.errno) {
      case NativeFs.ELOOP, NativeFs.EXDEV ->
          new Refused(
              where(path)
                  + " is, or is reached through, a symlink or a mount the sandbox controls: the"
                  + " engine does not follow it");
      case NativeFs.ENOTDIR ->
          new Refused(where(path) + " is reached through something that is not a directory");
      default -> new IOException("cannot " + what + " " + where(path) + ": " + e.getMessage());
    };
  }

  private String where(String path) {
    return root.resolve(path).toString();
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
