package dev.sandbox4j.runtime.internal.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * The Linux file system calls the engine makes on descriptors, through {@code java.lang.foreign}:
 * {@code openat2(2)} (to resolve a path inside a root, atomically), the {@code *at} calls that act
 * on one name in an open directory, {@code statx}, and directory listing; with the errno values and
 * flags every caller of this package's calls names. The other calls are where their job is: the
 * credentials of a file thread ({@link ThreadCredentials}), overlay layer marks ({@link
 * OverlayMarks}), mounts ({@link MountCalls}), content and metadata by descriptor ({@link
 * DescriptorCalls}, {@link FileCopy}); the link to libc itself is {@link Libc}.
 *
 * <p>Every call returns its result or throws {@link Errno}. Paths and names are passed as their
 * UTF-8 bytes. Only Linux on x86-64 and AArch64 is supported ({@link #AVAILABLE} is false
 * elsewhere, or if the native calls cannot be linked).
 */
public final class NativeFs {
  /** A failed system call, with its errno. */
  public static final class Errno extends Exception {
    private static final long serialVersionUID = 1L;

    public final int errno;

    public Errno(String call, int errno) {
      super(call + ": " + strerror(errno), null, false, false);
      this.errno = errno;
    }
  }

  // errno values (the same on x86-64 and AArch64)
  public static final int EPERM = 1;
  public static final int ENOENT = 2;
  static final int EINTR = 4;
  static final int ENXIO = 6;
  static final int EAGAIN = 11;
  public static final int EACCES = 13;
  static final int EBUSY = 16;
  public static final int EEXIST = 17;
  public static final int EXDEV = 18;
  public static final int ENOTDIR = 20;
  public static final int EISDIR = 21;
  public static final int EINVAL = 22;
  static final int ENOTTY = 25;
  static final int ENAMETOOLONG = 36;
  static final int ENOSYS = 38;
  public static final int ENOTEMPTY = 39;
  public static final int ELOOP = 40;
  static final int EOPNOTSUPP = 95;

  private static final boolean AARCH64 = "aarch64".equals(System.getProperty("os.arch"));

  public static final int O_RDONLY = 0;
  public static final int O_WRONLY = 1;
  public static final int O_CREAT = 0100;
  public static final int O_EXCL = 0200;
  static final int O_NOCTTY = 0400;
  static final int O_NONBLOCK = 04000;
  public static final int O_DIRECTORY = AARCH64 ? 040000 : 0200000;
  public static final int O_NOFOLLOW = AARCH64 ? 0100000 : 0400000;
  static final int O_CLOEXEC = 02000000;
  public static final int O_PATH = 010000000;

  public static final int AT_FDCWD = -100;
  static final int AT_SYMLINK_NOFOLLOW = 0x100;
  public static final int AT_REMOVEDIR = 0x200;
  static final int AT_EACCESS = 0x200;
  static final int AT_EMPTY_PATH = 0x1000;

  static final long RESOLVE_NO_XDEV = 0x01;
  static final long RESOLVE_NO_MAGICLINKS = 0x02;
  static final long RESOLVE_NO_SYMLINKS = 0x04;
  static final long RESOLVE_BENEATH = 0x08;
  static final long RESOLVE_IN_ROOT = 0x10;

  public static final int W_OK = 2;

  static final int S_IFMT = 0170000;
  public static final int S_IFDIR = 0040000;
  public static final int S_IFREG = 0100000;
  public static final int S_IFLNK = 0120000;

  private static final long OVERLAYFS_SUPER_MAGIC = 0x794c7630L;

  private static final long SYS_OPENAT2 = 437;
  private static final long SYS_FACCESSAT2 = 439;
  private static final long SYS_GETDENTS64 = AARCH64 ? 61 : 217;

  /** statx mask: type, mode, nlink, uid, gid, atime, ino, size, mtime. */
  private static final int STATX_BASIC = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x100 | 0x200;

  private static final int STATX_SIZE_BYTES = 256;
  private static final int PATH_BUFFER = 4096;

  public static final boolean AVAILABLE = Libc.AVAILABLE;

  private NativeFs() {}

  /** What {@link #statx} reports. {@code mode} holds the type bits and the permission bits. */
  public record Stat(
      int mode,
      int uid,
      int gid,
      long ino,
      int devMajor,
      int devMinor,
      long size,
      Instant modified,
      int nlink,
      Instant accessed,
      int rdevMajor,
      int rdevMinor) {
    public int type() {
      return mode & S_IFMT;
    }

    public boolean isDirectory() {
      return type() == S_IFDIR;
    }

    public boolean isRegular() {
      return type() == S_IFREG;
    }

    public boolean isSymlink() {
      return type() == S_IFLNK;
    }

    public boolean sameFile(Stat other) {
      return ino == other.ino && devMajor == other.devMajor && devMinor == other.devMinor;
    }
  }

  // ---- path resolution ----------------------------------------------------------------------

  /**
   * {@code openat2(root, path, flags, mode, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS |
   * RESOLVE_NO_XDEV)}: {@code path} resolved as if {@code root} were {@code /}, whatever its
   * symlinks and {@code ..} say, never through a {@code /proc} magic link nor onto another mount.
   * Retries while the kernel reports a concurrent rename (EAGAIN).
   */
  public static int openInRoot(int root, byte[] path, int flags, int mode) throws Errno {
    return openat2(
        root, path, flags, mode, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
  }

  /**
   * {@code openat2(dir, path, flags | O_CLOEXEC, mode, resolve)}. Retries while the kernel reports
   * a concurrent rename (EAGAIN).
   */
  static int openat2(int dir, byte[] path, int flags, int mode, long resolve) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment how = arena.allocate(24, 8);
      how.set(ValueLayout.JAVA_LONG, 0, (long) (flags | O_CLOEXEC) & 0xffffffffL);
      how.set(ValueLayout.JAVA_LONG, 8, (long) mode);
      how.set(ValueLayout.JAVA_LONG, 16, resolve);
      MemorySegment p = Libc.cString(arena, path);
      for (int attempt = 0; ; attempt++) {
        long r = (long) Libc.SYSCALL_4.invokeExact(state, SYS_OPENAT2, (long) dir, p, how, 24L);
        if (r >= 0) {
          return (int) r;
        }
        int errno = Libc.errno(state);
        if ((errno != EAGAIN && errno != EINTR) || attempt >= 100) {
          throw new Errno("openat2", errno);
        }
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** {@code openat(dir, name, flags, mode)} with O_CLOEXEC; for one name in a directory. */
  public static int openat(int dir, byte[] name, int flags, int mode) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment p = Libc.cString(arena, name);
      while (true) {
        int r = (int) Libc.OPENAT.invokeExact(state, dir, p, flags | O_CLOEXEC, mode);
        if (r >= 0) {
          return r;
        }
        int errno = Libc.errno(state);
        if (errno != EINTR) {
          throw new Errno("openat", errno);
        }
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Opens a host path (no root) as {@code O_PATH | O_DIRECTORY | O_NOFOLLOW}. */
  public static int openHostDirectory(String path) throws Errno {
    return openat(
        AT_FDCWD, path.getBytes(StandardCharsets.UTF_8), O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
  }

  // ---- metadata -----------------------------------------------------------------------------

  /** statx of the open file {@code fd} itself. */
  public static Stat fstat(int fd) throws Errno {
    return statx(fd, new byte[0], AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
  }

  /** statx of {@code name} in directory {@code dir}, not following a symlink. */
  public static Stat lstatAt(int dir, byte[] name) throws Errno {
    return statx(dir, name, AT_SYMLINK_NOFOLLOW);
  }

  private static Stat statx(int dir, byte[] name, int flags) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment buf = arena.allocate(STATX_SIZE_BYTES, 8);
      int r =
          (int)
              Libc.STATX.invokeExact(
                  state, dir, Libc.cString(arena, name), flags, STATX_BASIC, buf);
      if (r != 0) {
        throw new Errno("statx", Libc.errno(state));
      }
      int uid = buf.get(ValueLayout.JAVA_INT, 20);
      int gid = buf.get(ValueLayout.JAVA_INT, 24);
      int mode = Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT, 28));
      long ino = buf.get(ValueLayout.JAVA_LONG, 32);
      long size = buf.get(ValueLayout.JAVA_LONG, 40);
      long mtimeSec = buf.get(ValueLayout.JAVA_LONG, 112);
      int mtimeNsec = buf.get(ValueLayout.JAVA_INT, 120);
      int devMajor = buf.get(ValueLayout.JAVA_INT, 136);
      int devMinor = buf.get(ValueLayout.JAVA_INT, 140);
      int nlink = buf.get(ValueLayout.JAVA_INT, 16);
      long atimeSec = buf.get(ValueLayout.JAVA_LONG, 64);
      int atimeNsec = buf.get(ValueLayout.JAVA_INT, 72);
      int rdevMajor = buf.get(ValueLayout.JAVA_INT, 128);
      int rdevMinor = buf.get(ValueLayout.JAVA_INT, 132);
      return new Stat(
          mode,
          uid,
          gid,
          ino,
          devMajor,
          devMinor,
          size,
          Instant.ofEpochSecond(mtimeSec, Integer.toUnsignedLong(mtimeNsec)),
          nlink,
          Instant.ofEpochSecond(atimeSec, Integer.toUnsignedLong(atimeNsec)),
          rdevMajor,
          rdevMinor);
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Whether the open file {@code fd} is on an overlayfs mount. */
  public static boolean isOverlay(int fd) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment buf = arena.allocate(256, 8); // struct statfs is 120 bytes on both
      int r = (int) Libc.FSTATFS.invokeExact(state, fd, buf);
      if (r != 0) {
        throw new Errno("fstatfs", Libc.errno(state));
      }
      return buf.get(ValueLayout.JAVA_LONG, 0) == OVERLAYFS_SUPER_MAGIC;
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * {@code faccessat2(AT_FDCWD, "/proc/self/fd/<fd>", mode, AT_EACCESS)}: whether this thread's
   * credentials (its fsuid, fsgid and groups) may access the open file, by the kernel's rules.
   */
  public static void checkAccess(int fd, int mode) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment p = arena.allocateFrom("/proc/self/fd/" + fd);
      long r =
          (long)
              Libc.SYSCALL_FACCESS.invokeExact(
                  state, SYS_FACCESSAT2, (long) AT_FDCWD, p, (long) mode, (long) AT_EACCESS);
      if (r != 0) {
        throw new Errno("faccessat2", Libc.errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  // ---- changes ------------------------------------------------------------------------------

  public static void fchmod(int fd, int mode) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if ((int) Libc.FCHMOD.invokeExact(state, fd, mode) != 0) {
        throw new Errno("fchmod", Libc.errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  public static void renameat(int fromDir, byte[] from, int toDir, byte[] to) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r =
          (int)
              Libc.RENAMEAT.invokeExact(
                  state, fromDir, Libc.cString(arena, from), toDir, Libc.cString(arena, to));
      if (r != 0) {
        throw new Errno("renameat", Libc.errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  public static void unlinkat(int dir, byte[] name, int flags) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if ((int) Libc.UNLINKAT.invokeExact(state, dir, Libc.cString(arena, name), flags) != 0) {
        throw new Errno("unlinkat", Libc.errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  public static void mkdirat(int dir, byte[] name, int mode) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if ((int) Libc.MKDIRAT.invokeExact(state, dir, Libc.cString(arena, name), mode) != 0) {
        throw new Errno("mkdirat", Libc.errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** The text of symlink {@code name} in {@code dir}, as bytes. */
  public static byte[] readlinkat(int dir, byte[] name) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment buf = arena.allocate(PATH_BUFFER);
      long n =
          (long)
              Libc.READLINKAT.invokeExact(
                  state, dir, Libc.cString(arena, name), buf, (long) PATH_BUFFER);
      if (n < 0) {
        throw new Errno("readlinkat", Libc.errno(state));
      }
      if (n >= PATH_BUFFER) {
        throw new Errno("readlinkat", ENAMETOOLONG);
      }
      return buf.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE);
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * The names in the open directory {@code fd} (read from its current offset), without . and ...
   */
  public static List<byte[]> readDirectory(int fd) throws Errno {
    List<byte[]> names = new ArrayList<>();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int size = 64 * 1024;
      MemorySegment buf = arena.allocate(size, 8);
      while (true) {
        long n =
            (long) Libc.SYSCALL_3.invokeExact(state, SYS_GETDENTS64, (long) fd, buf, (long) size);
        if (n < 0) {
          int errno = Libc.errno(state);
          if (errno == EINTR) {
            continue;
          }
          throw new Errno("getdents64", errno);
        }
        if (n == 0) {
          return names;
        }
        // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        long offset = 0;
        while (offset < n) {
          int reclen = Short.toUnsignedInt(buf.get(ValueLayout.JAVA_SHORT, offset + 16));
          long nameStart = offset + 19;
          long nameEnd = nameStart;
          long limit = offset + reclen;
          while (nameEnd < limit && buf.get(ValueLayout.JAVA_BYTE, nameEnd) != 0) {
            nameEnd++;
          }
          byte[] name = buf.asSlice(nameStart, nameEnd - nameStart).toArray(ValueLayout.JAVA_BYTE);
          if (!isDotOrDotDot(name)) {
            names.add(name);
          }
          offset += reclen;
        }
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  static boolean isDotOrDotDot(byte[] name) {
    return (name.length == 1 && name[0] == '.')
        || (name.length == 2 && name[0] == '.' && name[1] == '.');
  }

  public static void close(int fd) {
    if (fd < 0) {
      return;
    }
    try {
      int ignored = (int) Libc.CLOSE.invokeExact(fd);
    } catch (Throwable t) {
      // nothing more to do for a descriptor we cannot close
    }
  }

  public static String strerror(int errno) {
    if (Libc.STRERROR == null) {
      return "errno " + errno;
    }
    try {
      MemorySegment s = (MemorySegment) Libc.STRERROR.invokeExact(errno);
      return s.reinterpret(256).getString(0);
    } catch (Throwable t) {
      return "errno " + errno;
    }
  }
}
