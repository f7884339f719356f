package dev.sandbox4j.runtime.internal.linux;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * The Linux file system calls the engine makes itself, through {@code java.lang.foreign}: {@code
 * openat2(2)} (to resolve a path inside a root, atomically), the {@code *at} calls that act on one
 * name in an open directory, and the per-thread credential calls ({@code setfsuid}, {@code
 * setfsgid}, and the <em>raw</em> {@code setgroups} system call: glibc's wrapper changes every
 * thread of the process, the system call only the calling one), the overlay layer calls (whiteout
 * {@code mknod}, xattrs), and {@code mount}/{@code umount2} of sandbox roots (a spawned {@code
 * mount(8)} cost a few milliseconds of every create and destroy).
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
  static final int EAGAIN = 11;
  public static final int EACCES = 13;
  static final int EBUSY = 16;
  public static final int EEXIST = 17;
  public static final int EXDEV = 18;
  public static final int ENOTDIR = 20;
  public static final int EISDIR = 21;
  public static final int EINVAL = 22;
  static final int ENAMETOOLONG = 36;
  static final int ENOSYS = 38;
  public static final int ENOTEMPTY = 39;
  public static final int ELOOP = 40;

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
  private static final int PR_GET_DUMPABLE = 3;
  private static final int PR_SET_DUMPABLE = 4;

  private static final long SYS_OPENAT2 = 437;
  private static final long SYS_FACCESSAT2 = 439;
  private static final long SYS_SETGROUPS = AARCH64 ? 159 : 116;
  private static final long SYS_GETDENTS64 = AARCH64 ? 61 : 217;
  private static final long SYS_GETGROUPS = AARCH64 ? 158 : 115;

  /** statx mask: type, mode, nlink, uid, gid, atime, ino, size, mtime. */
  private static final int STATX_BASIC = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x100 | 0x200;

  private static final int STATX_SIZE_BYTES = 256;
  private static final int PATH_BUFFER = 4096;

  private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

  public static final boolean AVAILABLE;

  /** Whether the process was dumpable when this class was loaded. */
  private static final boolean DUMPABLE;

  private static final MethodHandle SYSCALL_4; // openat2
  private static final MethodHandle SYSCALL_3; // getdents64
  private static final MethodHandle SYSCALL_2; // setgroups
  private static final MethodHandle OPENAT;
  private static final MethodHandle STATX;
  private static final MethodHandle FSTATFS;
  private static final MethodHandle FCHMOD;
  private static final MethodHandle RENAMEAT;
  private static final MethodHandle UNLINKAT;
  private static final MethodHandle MKDIRAT;
  private static final MethodHandle READLINKAT;
  private static final MethodHandle CLOSE;
  private static final MethodHandle SETFSUID;
  private static final MethodHandle SETFSGID;
  private static final MethodHandle PRCTL;
  private static final MethodHandle STRERROR;
  private static final MethodHandle SYSCALL_FACCESS; // faccessat2(long, ptr, long, long)
  private static final MethodHandle MKNOD;
  private static final MethodHandle LSETXATTR;
  private static final MethodHandle LGETXATTR;
  private static final MethodHandle MOUNT;
  private static final MethodHandle UMOUNT2;
  private static final MethodHandle SYSCALL_5; // mount_setattr

  static {
    boolean available = false;
    MethodHandle[] h = new MethodHandle[25];
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    if (os.equals("linux") && (arch.equals("amd64") || arch.equals("aarch64"))) {
      try {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        ValueLayout i = ValueLayout.JAVA_INT;
        ValueLayout l = ValueLayout.JAVA_LONG;
        ValueLayout a = ValueLayout.ADDRESS;
        MemorySegment syscall = libc.find("syscall").orElseThrow();
        // syscall(2) is variadic and reads every argument as a long: pass longs only.
        h[0] =
            linker.downcallHandle(
                syscall,
                FunctionDescriptor.of(l, l, l, a, a, l),
                errno,
                Linker.Option.firstVariadicArg(1));
        h[1] =
            linker.downcallHandle(
                syscall,
                FunctionDescriptor.of(l, l, l, a, l),
                errno,
                Linker.Option.firstVariadicArg(1));
        h[2] =
            linker.downcallHandle(
                syscall,
                FunctionDescriptor.of(l, l, l, a),
                errno,
                Linker.Option.firstVariadicArg(1));
        h[3] =
            linker.downcallHandle(
                libc.find("openat").orElseThrow(),
                FunctionDescriptor.of(i, i, a, i, i),
                errno,
                Linker.Option.firstVariadicArg(3));
        h[4] =
            linker.downcallHandle(
                libc.find("statx").orElseThrow(), FunctionDescriptor.of(i, i, a, i, i, a), errno);
        h[5] =
            linker.downcallHandle(
                libc.find("fstatfs").orElseThrow(), FunctionDescriptor.of(i, i, a), errno);
        h[6] =
            linker.downcallHandle(
                libc.find("fchmod").orElseThrow(), FunctionDescriptor.of(i, i, i), errno);
        h[7] =
            linker.downcallHandle(
                libc.find("renameat").orElseThrow(), FunctionDescriptor.of(i, i, a, i, a), errno);
        h[8] =
            linker.downcallHandle(
                libc.find("unlinkat").orElseThrow(), FunctionDescriptor.of(i, i, a, i), errno);
        h[9] =
            linker.downcallHandle(
                libc.find("mkdirat").orElseThrow(), FunctionDescriptor.of(i, i, a, i), errno);
        h[10] =
            linker.downcallHandle(
                libc.find("readlinkat").orElseThrow(), FunctionDescriptor.of(l, i, a, a, l), errno);
        h[11] =
            linker.downcallHandle(libc.find("close").orElseThrow(), FunctionDescriptor.of(i, i));
        h[12] =
            linker.downcallHandle(
                libc.find("setfsuid").orElseThrow(), FunctionDescriptor.of(i, i), errno);
        h[13] =
            linker.downcallHandle(
                libc.find("setfsgid").orElseThrow(), FunctionDescriptor.of(i, i), errno);
        h[16] =
            linker.downcallHandle(
                libc.find("prctl").orElseThrow(),
                FunctionDescriptor.of(i, i, l),
                errno,
                Linker.Option.firstVariadicArg(1));
        h[17] =
            linker.downcallHandle(libc.find("strerror").orElseThrow(), FunctionDescriptor.of(a, i));
        h[18] =
            linker.downcallHandle(
                syscall,
                FunctionDescriptor.of(l, l, l, a, l, l),
                errno,
                Linker.Option.firstVariadicArg(1));
        h[19] =
            linker.downcallHandle(
                libc.find("mknod").orElseThrow(), FunctionDescriptor.of(i, a, i, l), errno);
        h[20] =
            linker.downcallHandle(
                libc.find("lsetxattr").orElseThrow(),
                FunctionDescriptor.of(i, a, a, a, l, i),
                errno);
        h[21] =
            linker.downcallHandle(
                libc.find("lgetxattr").orElseThrow(), FunctionDescriptor.of(l, a, a, a, l), errno);
        h[22] =
            linker.downcallHandle(
                libc.find("mount").orElseThrow(), FunctionDescriptor.of(i, a, a, a, l, a), errno);
        h[23] =
            linker.downcallHandle(
                libc.find("umount2").orElseThrow(), FunctionDescriptor.of(i, a, i), errno);
        h[24] =
            linker.downcallHandle(
                syscall,
                FunctionDescriptor.of(l, l, l, a, l, a, l),
                errno,
                Linker.Option.firstVariadicArg(1));
        available = true;
      } catch (RuntimeException | Error unavailable) {
        available = false; // no native access or no libc: SandboxFiles is not used
      }
    }
    AVAILABLE = available;
    SYSCALL_4 = h[0];
    SYSCALL_5 = h[24];
    SYSCALL_3 = h[1];
    SYSCALL_2 = h[2];
    OPENAT = h[3];
    STATX = h[4];
    FSTATFS = h[5];
    FCHMOD = h[6];
    RENAMEAT = h[7];
    UNLINKAT = h[8];
    MKDIRAT = h[9];
    READLINKAT = h[10];
    CLOSE = h[11];
    SETFSUID = h[12];
    SETFSGID = h[13];
    PRCTL = h[16];
    STRERROR = h[17];
    SYSCALL_FACCESS = h[18];
    MKNOD = h[19];
    LSETXATTR = h[20];
    LGETXATTR = h[21];
    MOUNT = h[22];
    UMOUNT2 = h[23];
    DUMPABLE = dumpable();
  }

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
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment how = arena.allocate(24, 8);
      how.set(ValueLayout.JAVA_LONG, 0, (long) (flags | O_CLOEXEC) & 0xffffffffL);
      how.set(ValueLayout.JAVA_LONG, 8, (long) mode);
      how.set(ValueLayout.JAVA_LONG, 16, resolve);
      MemorySegment p = cString(arena, path);
      for (int attempt = 0; ; attempt++) {
        long r = (long) SYSCALL_4.invokeExact(state, SYS_OPENAT2, (long) dir, p, how, 24L);
        if (r >= 0) {
          return (int) r;
        }
        int errno = errno(state);
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
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment p = cString(arena, name);
      while (true) {
        int r = (int) OPENAT.invokeExact(state, dir, p, flags | O_CLOEXEC, mode);
        if (r >= 0) {
          return r;
        }
        int errno = errno(state);
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
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocate(STATX_SIZE_BYTES, 8);
      int r = (int) STATX.invokeExact(state, dir, cString(arena, name), flags, STATX_BASIC, buf);
      if (r != 0) {
        throw new Errno("statx", errno(state));
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
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocate(256, 8); // struct statfs is 120 bytes on both
      int r = (int) FSTATFS.invokeExact(state, fd, buf);
      if (r != 0) {
        throw new Errno("fstatfs", errno(state));
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
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment p = arena.allocateFrom("/proc/self/fd/" + fd);
      long r =
          (long)
              SYSCALL_FACCESS.invokeExact(
                  state, SYS_FACCESSAT2, (long) AT_FDCWD, p, (long) mode, (long) AT_EACCESS);
      if (r != 0) {
        throw new Errno("faccessat2", errno(state));
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
      MemorySegment state = arena.allocate(CAPTURE);
      if ((int) FCHMOD.invokeExact(state, fd, mode) != 0) {
        throw new Errno("fchmod", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  public static void renameat(int fromDir, byte[] from, int toDir, byte[] to) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r =
          (int)
              RENAMEAT.invokeExact(state, fromDir, cString(arena, from), toDir, cString(arena, to));
      if (r != 0) {
        throw new Errno("renameat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  public static void unlinkat(int dir, byte[] name, int flags) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      if ((int) UNLINKAT.invokeExact(state, dir, cString(arena, name), flags) != 0) {
        throw new Errno("unlinkat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  public static void mkdirat(int dir, byte[] name, int mode) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      if ((int) MKDIRAT.invokeExact(state, dir, cString(arena, name), mode) != 0) {
        throw new Errno("mkdirat", errno(state));
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
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocate(PATH_BUFFER);
      long n =
          (long) READLINKAT.invokeExact(state, dir, cString(arena, name), buf, (long) PATH_BUFFER);
      if (n < 0) {
        throw new Errno("readlinkat", errno(state));
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
      MemorySegment state = arena.allocate(CAPTURE);
      int size = 64 * 1024;
      MemorySegment buf = arena.allocate(size, 8);
      while (true) {
        long n = (long) SYSCALL_3.invokeExact(state, SYS_GETDENTS64, (long) fd, buf, (long) size);
        if (n < 0) {
          int errno = errno(state);
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
      int ignored = (int) CLOSE.invokeExact(fd);
    } catch (Throwable t) {
      // nothing more to do for a descriptor we cannot close
    }
  }

  // ---- credentials of the calling thread ----------------------------------------------------

  /** A thread's file system identity: fsuid, fsgid and supplementary groups. */
  public record Identity(int fsuid, int fsgid, int[] groups) {}

  /**
   * Gives the calling thread, and only it, the file system identity of {@code uid}/{@code gid},
   * with {@code gid} as its only supplementary group; returns the identity it had, for {@link
   * #restore}. The thread must start as root (fsuid 0). If the new identity does not read back as
   * asked, the old one is restored and this fails.
   */
  public static Identity assume(int uid, int gid) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment groups = arena.allocate(ValueLayout.JAVA_INT, 1024);
      long n = (long) SYSCALL_2.invokeExact(state, SYS_GETGROUPS, 1024L, groups);
      if (n < 0) {
        throw new Errno("getgroups", errno(state));
      }
      int[] saved = groups.asSlice(0, n * 4).toArray(ValueLayout.JAVA_INT);
      int fsuid = (int) SETFSUID.invokeExact(state, -1); // -1 is invalid: only reads
      int fsgid = (int) SETFSGID.invokeExact(state, -1);
      if (fsuid != 0) {
        throw new Errno("assume the sandbox user's identity (not root)", EPERM);
      }
      Identity old = new Identity(fsuid, fsgid, saved);
      MemorySegment one = arena.allocate(ValueLayout.JAVA_INT, 1);
      one.set(ValueLayout.JAVA_INT, 0, gid);
      long r = (long) SYSCALL_2.invokeExact(state, SYS_SETGROUPS, 1L, one);
      if (r != 0) {
        throw new Errno("setgroups", errno(state));
      }
      int ignoredGid = (int) SETFSGID.invokeExact(state, gid);
      int ignoredUid = (int) SETFSUID.invokeExact(state, uid);
      if ((int) SETFSUID.invokeExact(state, -1) != uid
          || (int) SETFSGID.invokeExact(state, -1) != gid) {
        restore(old);
        throw new Errno("assume the sandbox user's identity", EPERM);
      }
      return old;
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Gives the calling thread back {@code old}. A change of fsuid makes the process non-dumpable:
   * that is undone too if the process was dumpable (its real and effective ids stay root
   * throughout, so this exposes nothing to the sandbox's user).
   */
  public static void restore(Identity old) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int ignoredUid = (int) SETFSUID.invokeExact(state, old.fsuid());
      int ignoredGid = (int) SETFSGID.invokeExact(state, old.fsgid());
      MemorySegment groups = arena.allocate(ValueLayout.JAVA_INT, Math.max(1, old.groups().length));
      MemorySegment.copy(old.groups(), 0, groups, ValueLayout.JAVA_INT, 0, old.groups().length);
      long r =
          (long) SYSCALL_2.invokeExact(state, SYS_SETGROUPS, (long) old.groups().length, groups);
      if (r != 0 || (int) SETFSUID.invokeExact(state, -1) != old.fsuid()) {
        throw new IllegalStateException(
            "cannot restore a file thread's identity: " + strerror(errno(state)));
      }
      if (DUMPABLE) {
        int ignored = (int) PRCTL.invokeExact(state, PR_SET_DUMPABLE, 1L);
      }
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  private static boolean dumpable() {
    if (PRCTL == null) {
      return false;
    }
    try (Arena arena = Arena.ofConfined()) {
      return (int) PRCTL.invokeExact(arena.allocate(CAPTURE), PR_GET_DUMPABLE, 0L) == 1;
    } catch (Throwable t) {
      return false;
    }
  }

  // ---- overlay layer files ------------------------------------------------------------------
  // What the JDK lacks and image layers need: whiteouts (character devices 0/0, made with mknod)
  // and opaque directories (the trusted.overlay.opaque xattr; the JDK's attribute view only
  // reaches user.*). By host path, never following a symlink at the last component.

  /** The xattr that makes a directory of an overlay layer hide the layers below it. */
  static final String OPAQUE = "trusted.overlay.opaque";

  private static final int S_IFCHR = 0020000;
  private static final int ENODATA = 61;
  private static final int ERANGE = 34;

  /** Creates an overlayfs whiteout at {@code path}: a character device 0/0, mode 0. */
  public static void mknodWhiteout(Path path) throws IOException {
    requireAvailable();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r = (int) MKNOD.invokeExact(state, cString(arena, utf8(path)), S_IFCHR, 0L);
      if (r != 0) {
        throw layerFailure("mknod", path, errno(state));
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Sets extended attribute {@code name} of {@code path} itself (not a symlink's target). */
  static void setXattr(Path path, String name, byte[] value) throws IOException {
    requireAvailable();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment data = arena.allocate(Math.max(1, value.length));
      MemorySegment.copy(value, 0, data, ValueLayout.JAVA_BYTE, 0, value.length);
      int r =
          (int)
              LSETXATTR.invokeExact(
                  state,
                  cString(arena, utf8(path)),
                  arena.allocateFrom(name),
                  data,
                  (long) value.length,
                  0);
      if (r != 0) {
        throw layerFailure("setxattr " + name, path, errno(state));
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Extended attribute {@code name} of {@code path} itself, or empty if it has none. */
  static Optional<byte[]> getXattr(Path path, String name) throws IOException {
    requireAvailable();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment file = cString(arena, utf8(path));
      MemorySegment attr = arena.allocateFrom(name);
      for (long size = 256; ; size *= 16) {
        MemorySegment buffer = arena.allocate(size);
        long n = (long) LGETXATTR.invokeExact(state, file, attr, buffer, size);
        if (n >= 0) {
          return Optional.of(buffer.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE));
        }
        int errno = errno(state);
        if (errno == ENODATA) {
          return Optional.empty();
        }
        if (errno != ERANGE || size > (1 << 20)) {
          throw layerFailure("getxattr " + name, path, errno);
        }
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Whether {@code path} is an opaque directory of an overlay layer. */
  public static boolean isOpaque(Path path) throws IOException {
    return getXattr(path, OPAQUE)
        .map(v -> new String(v, StandardCharsets.UTF_8).equals("y"))
        .orElse(false);
  }

  /** Marks directory {@code dir} opaque: in a stack of layers it hides what lower layers hold. */
  public static void setOpaque(Path dir) throws IOException {
    setXattr(dir, OPAQUE, "y".getBytes(StandardCharsets.UTF_8));
  }

  // ---- mounts -------------------------------------------------------------------------------

  public static final int MNT_DETACH = 2;

  public static final long MS_NOSUID = 2;
  public static final long MS_NODEV = 4;
  public static final long MS_REMOUNT = 32;
  public static final long MS_BIND = 4096;

  /** {@code mount(source, target, type, 0, options)}: a new mount, with no flags. */
  public static void mount(String source, Path target, String type, String options) throws Errno {
    mount(source, target, type, 0L, options);
  }

  /** {@code mount(source, target, type, flags, options)}; {@code options} may be null. */
  public static void mount(String source, Path target, String type, long flags, String options)
      throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment data =
          options == null
              ? MemorySegment.NULL
              : cString(arena, options.getBytes(StandardCharsets.UTF_8));
      int r =
          (int)
              MOUNT.invokeExact(
                  state,
                  cString(arena, source.getBytes(StandardCharsets.UTF_8)),
                  cString(arena, utf8(target)),
                  cString(arena, type.getBytes(StandardCharsets.UTF_8)),
                  flags,
                  data);
      if (r != 0) {
        throw new Errno("mount", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  // The new mount API: the same numbers on x86-64 and aarch64.
  private static final long SYS_OPEN_TREE = 428;
  private static final long SYS_MOUNT_SETATTR = 442;
  private static final long OPEN_TREE_CLONE = 1;
  private static final long OPEN_TREE_CLOEXEC = 02000000;
  public static final long MOUNT_ATTR_RDONLY = 0x1;
  static final long MOUNT_ATTR_NOSUID = 0x2;
  public static final long MOUNT_ATTR_NODEV = 0x4;
  private static final long MOUNT_ATTR_IDMAP = 0x00100000;

  /**
   * A detached clone of the mount tree at {@code source} with its ids shown through the user
   * namespace {@code usernsFd} (an idmapped mount: a file whose on-disk uid is {@code k} in that
   * namespace shows as the host id {@code k} maps to) and {@code attributes} set, mounted nowhere
   * ({@code open_tree(OPEN_TREE_CLONE)}, {@code mount_setattr(MOUNT_ATTR_IDMAP)}, no {@code
   * move_mount}): the returned descriptor ({@code O_CLOEXEC}; the caller closes it) names it, and
   * {@code /proc/self/fd/<fd>} reaches it for as long as it is open (an overlay lower, say, which
   * keeps a private clone of it).
   */
  public static int idmappedTree(Path source, int usernsFd, long attributes) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment empty = cString(arena, new byte[0]);
      long tree =
          (long)
              SYSCALL_3.invokeExact(
                  state,
                  SYS_OPEN_TREE,
                  (long) AT_FDCWD,
                  cString(arena, utf8(source)),
                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
      if (tree < 0) {
        throw new Errno("open_tree", errno(state));
      }
      MemorySegment attr = arena.allocate(32); // struct mount_attr
      attr.set(ValueLayout.JAVA_LONG, 0, MOUNT_ATTR_IDMAP | attributes); // attr_set
      attr.set(ValueLayout.JAVA_LONG, 24, usernsFd); // userns_fd
      long r =
          (long)
              SYSCALL_5.invokeExact(
                  state, SYS_MOUNT_SETATTR, tree, empty, (long) AT_EMPTY_PATH, attr, 32L);
      if (r != 0) {
        Errno e = new Errno("mount_setattr", errno(state));
        close((int) tree);
        throw e;
      }
      return (int) tree;
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** {@code umount2(target, flags)}. */
  public static void umount2(Path target, int flags) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r = (int) UMOUNT2.invokeExact(state, cString(arena, utf8(target)), flags);
      if (r != 0) {
        throw new Errno("umount2", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  private static void requireAvailable() throws IOException {
    if (!AVAILABLE) {
      throw new IOException(
          "native file operations are unavailable: Linux on amd64/aarch64 with"
              + " --enable-native-access=ALL-UNNAMED is needed");
    }
  }

  private static byte[] utf8(Path path) {
    return path.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static IOException layerFailure(String call, Path path, int errno) {
    return new IOException(call + " " + path + ": " + strerror(errno));
  }

  // ---- content and metadata by descriptor (Beneath, Trees.copy) ------------------------------
  // What acting on a tree from descriptors only needs beyond the calls above: reading and writing
  // an open file, ownership, times, links, special files, xattrs and copy-on-write clones. Linked
  // lazily (a holder class), so that a host without one of them still has the calls above.

  static final int EOPNOTSUPP = 95;
  static final int ENXIO = 6;
  static final int ENOTTY = 25;
  private static final int SEEK_DATA = 3;
  private static final int SEEK_HOLE = 4;
  private static final long FICLONE = 0x40049409L;

  private static final class More {
    static final MethodHandle READ;
    static final MethodHandle WRITE;
    static final MethodHandle FCHOWN;
    static final MethodHandle FCHOWNAT;
    static final MethodHandle FCHMODAT;
    static final MethodHandle UTIMENSAT;
    static final MethodHandle FUTIMENS;
    static final MethodHandle SYMLINKAT;
    static final MethodHandle LINKAT;
    static final MethodHandle MKNODAT;
    static final MethodHandle IOCTL;
    static final MethodHandle COPY_FILE_RANGE;
    static final MethodHandle PREAD;
    static final MethodHandle PWRITE;
    static final MethodHandle LSEEK;
    static final MethodHandle FTRUNCATE;
    static final MethodHandle FLISTXATTR;
    static final MethodHandle FGETXATTR;
    static final MethodHandle FSETXATTR;

    static {
      Linker linker = Linker.nativeLinker();
      SymbolLookup libc = linker.defaultLookup();
      Linker.Option errno = Linker.Option.captureCallState("errno");
      ValueLayout i = ValueLayout.JAVA_INT;
      ValueLayout l = ValueLayout.JAVA_LONG;
      ValueLayout a = ValueLayout.ADDRESS;
      READ = handle(linker, libc, "read", FunctionDescriptor.of(l, i, a, l), errno);
      WRITE = handle(linker, libc, "write", FunctionDescriptor.of(l, i, a, l), errno);
      FCHOWN = handle(linker, libc, "fchown", FunctionDescriptor.of(i, i, i, i), errno);
      FCHOWNAT = handle(linker, libc, "fchownat", FunctionDescriptor.of(i, i, a, i, i, i), errno);
      FCHMODAT = handle(linker, libc, "fchmodat", FunctionDescriptor.of(i, i, a, i, i), errno);
      UTIMENSAT = handle(linker, libc, "utimensat", FunctionDescriptor.of(i, i, a, a, i), errno);
      FUTIMENS = handle(linker, libc, "futimens", FunctionDescriptor.of(i, i, a), errno);
      SYMLINKAT = handle(linker, libc, "symlinkat", FunctionDescriptor.of(i, a, i, a), errno);
      LINKAT = handle(linker, libc, "linkat", FunctionDescriptor.of(i, i, a, i, a, i), errno);
      MKNODAT = handle(linker, libc, "mknodat", FunctionDescriptor.of(i, i, a, i, l), errno);
      IOCTL =
          linker.downcallHandle(
              libc.find("ioctl").orElseThrow(),
              FunctionDescriptor.of(i, i, l, i),
              errno,
              Linker.Option.firstVariadicArg(2));
      COPY_FILE_RANGE =
          handle(
              linker, libc, "copy_file_range", FunctionDescriptor.of(l, i, a, i, a, l, i), errno);
      LSEEK = handle(linker, libc, "lseek", FunctionDescriptor.of(l, i, l, i), errno);
      PREAD = handle(linker, libc, "pread", FunctionDescriptor.of(l, i, a, l, l), errno);
      PWRITE = handle(linker, libc, "pwrite", FunctionDescriptor.of(l, i, a, l, l), errno);
      FTRUNCATE = handle(linker, libc, "ftruncate", FunctionDescriptor.of(i, i, l), errno);
      FLISTXATTR = handle(linker, libc, "flistxattr", FunctionDescriptor.of(l, i, a, l), errno);
      FGETXATTR = handle(linker, libc, "fgetxattr", FunctionDescriptor.of(l, i, a, a, l), errno);
      FSETXATTR = handle(linker, libc, "fsetxattr", FunctionDescriptor.of(i, i, a, a, l, i), errno);
    }

    private static MethodHandle handle(
        Linker linker, SymbolLookup libc, String name, FunctionDescriptor d, Linker.Option o) {
      return linker.downcallHandle(libc.find(name).orElseThrow(), d, o);
    }
  }

  /**
   * Reads up to {@code max} bytes from the open file {@code fd} (from its offset); fewer at EOF.
   */
  static byte[] read(int fd, int max) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocate(Math.max(1, max));
      long done = 0;
      while (done < max) {
        long n = (long) More.READ.invokeExact(state, fd, buf.asSlice(done), (long) max - done);
        if (n < 0) {
          if (errno(state) == EINTR) {
            continue;
          }
          throw new Errno("read", errno(state));
        }
        if (n == 0) {
          break;
        }
        done += n;
      }
      return buf.asSlice(0, done).toArray(ValueLayout.JAVA_BYTE);
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Writes all of {@code data} to the open file {@code fd}. */
  static void write(int fd, byte[] data) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocate(Math.max(1, data.length));
      MemorySegment.copy(data, 0, buf, ValueLayout.JAVA_BYTE, 0, data.length);
      long done = 0;
      while (done < data.length) {
        long n =
            (long) More.WRITE.invokeExact(state, fd, buf.asSlice(done), (long) data.length - done);
        if (n < 0) {
          if (errno(state) == EINTR) {
            continue;
          }
          throw new Errno("write", errno(state));
        }
        done += n;
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  static void fchown(int fd, int uid, int gid) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      if ((int) More.FCHOWN.invokeExact(state, fd, uid, gid) != 0) {
        throw new Errno("fchown", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Owner of {@code name} in {@code dir} itself (a symlink is not followed). */
  static void lchownAt(int dir, byte[] name, int uid, int gid) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r =
          (int)
              More.FCHOWNAT.invokeExact(
                  state, dir, cString(arena, name), uid, gid, AT_SYMLINK_NOFOLLOW);
      if (r != 0) {
        throw new Errno("fchownat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Mode of {@code name} in {@code dir}: only for a name the caller just made, that is not a
   * symlink (fchmodat follows one).
   */
  static void chmodAt(int dir, byte[] name, int mode) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      if ((int) More.FCHMODAT.invokeExact(state, dir, cString(arena, name), mode, 0) != 0) {
        throw new Errno("fchmodat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Access and modification times of {@code name} in {@code dir} itself (never a link's target).
   */
  static void setTimesAt(int dir, byte[] name, Instant accessed, Instant modified) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment times = timespecs(arena, accessed, modified);
      int r =
          (int)
              More.UTIMENSAT.invokeExact(
                  state, dir, cString(arena, name), times, AT_SYMLINK_NOFOLLOW);
      if (r != 0) {
        throw new Errno("utimensat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Access and modification times of the open file {@code fd}. */
  static void setTimes(int fd, Instant accessed, Instant modified) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r = (int) More.FUTIMENS.invokeExact(state, fd, timespecs(arena, accessed, modified));
      if (r != 0) {
        throw new Errno("futimens", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  private static MemorySegment timespecs(Arena arena, Instant accessed, Instant modified) {
    MemorySegment times = arena.allocate(32, 8);
    times.set(ValueLayout.JAVA_LONG, 0, accessed.getEpochSecond());
    times.set(ValueLayout.JAVA_LONG, 8, accessed.getNano());
    times.set(ValueLayout.JAVA_LONG, 16, modified.getEpochSecond());
    times.set(ValueLayout.JAVA_LONG, 24, modified.getNano());
    return times;
  }

  /** Creates symlink {@code name} in {@code dir} with text {@code target}. */
  static void symlinkat(byte[] target, int dir, byte[] name) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r =
          (int)
              More.SYMLINKAT.invokeExact(state, cString(arena, target), dir, cString(arena, name));
      if (r != 0) {
        throw new Errno("symlinkat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** A new name {@code name} in {@code dir} for the open file {@code fd} (a hard link). */
  static void linkFd(int fd, int dir, byte[] name) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r =
          (int)
              More.LINKAT.invokeExact(
                  state, fd, cString(arena, new byte[0]), dir, cString(arena, name), AT_EMPTY_PATH);
      if (r != 0) {
        throw new Errno("linkat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** {@code mknodat(dir, name, mode, makedev(major, minor))}: a FIFO, socket or device node. */
  static void mknodat(int dir, byte[] name, int mode, int major, int minor) throws Errno {
    long dev =
        ((long) (major & 0xfffff000) << 32)
            | ((long) (major & 0xfff) << 8)
            | ((long) (minor & 0xffffff00) << 12)
            | (minor & 0xff);
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      if ((int) More.MKNODAT.invokeExact(state, dir, cString(arena, name), mode, dev) != 0) {
        throw new Errno("mknodat", errno(state));
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Copies the data of regular file {@code from} into the empty regular file {@code to}, both open:
   * a copy-on-write clone if {@code clone} and the file system can ({@code FICLONE}), else {@code
   * copy_file_range} of each data extent, holes left as holes (a sparse file stays sparse), then
   * the size. Returns whether to try a clone next time (false once the file system refused one).
   */
  static boolean copyData(int from, int to, long size, boolean clone) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      if (clone) {
        if ((int) More.IOCTL.invokeExact(state, to, FICLONE, from) == 0) {
          return true;
        }
        int e = errno(state);
        clone = e != EOPNOTSUPP && e != EXDEV && e != EINVAL && e != ENOTTY;
      }
      MemorySegment inOff = arena.allocate(ValueLayout.JAVA_LONG);
      MemorySegment outOff = arena.allocate(ValueLayout.JAVA_LONG);
      long pos = 0;
      while (pos < size) {
        long data = (long) More.LSEEK.invokeExact(state, from, pos, SEEK_DATA);
        if (data < 0) {
          if (errno(state) == ENXIO) {
            break; // only a hole is left
          }
          throw new Errno("lseek", errno(state));
        }
        long hole = (long) More.LSEEK.invokeExact(state, from, data, SEEK_HOLE);
        if (hole < 0) {
          throw new Errno("lseek", errno(state));
        }
        hole = Math.min(hole, size);
        inOff.set(ValueLayout.JAVA_LONG, 0, data);
        outOff.set(ValueLayout.JAVA_LONG, 0, data);
        while (inOff.get(ValueLayout.JAVA_LONG, 0) < hole) {
          long left = hole - inOff.get(ValueLayout.JAVA_LONG, 0);
          long n = (long) More.COPY_FILE_RANGE.invokeExact(state, from, inOff, to, outOff, left, 0);
          if (n < 0) {
            int e = errno(state);
            if (e == EINTR) {
              continue;
            }
            if (e == EXDEV || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL) {
              // Another file system (a sandbox's disk image and the image store, or two disks):
              // the kernel copies only within one, so read and write the extent instead.
              long at = inOff.get(ValueLayout.JAVA_LONG, 0);
              inOff.set(
                  ValueLayout.JAVA_LONG, 0, copyByReadWrite(arena, state, from, to, at, hole));
              break;
            }
            throw new Errno("copy_file_range", e);
          }
          if (n == 0) {
            break; // the file shrank meanwhile
          }
        }
        pos = Math.max(hole, inOff.get(ValueLayout.JAVA_LONG, 0));
      }
      if ((int) More.FTRUNCATE.invokeExact(state, to, size) != 0) {
        throw new Errno("ftruncate", errno(state));
      }
      return clone;
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Copies bytes {@code [at, end)} of open file {@code from} to the same offsets of {@code to} with
   * pread/pwrite; returns where it stopped ({@code end}, or earlier if the file shrank meanwhile).
   */
  private static long copyByReadWrite(
      Arena arena, MemorySegment state, int from, int to, long at, long end) throws Throwable {
    int chunk = 1 << 20;
    MemorySegment buffer = arena.allocate(chunk);
    while (at < end) {
      long n = (long) More.PREAD.invokeExact(state, from, buffer, Math.min(chunk, end - at), at);
      if (n < 0) {
        if (errno(state) == EINTR) {
          continue;
        }
        throw new Errno("pread", errno(state));
      }
      if (n == 0) {
        return at; // the file shrank meanwhile
      }
      long written = 0;
      while (written < n) {
        long w =
            (long)
                More.PWRITE.invokeExact(
                    state, to, buffer.asSlice(written), n - written, at + written);
        if (w < 0) {
          if (errno(state) == EINTR) {
            continue;
          }
          throw new Errno("pwrite", errno(state));
        }
        written += w;
      }
      at += n;
    }
    return at;
  }

  /**
   * Copies every extended attribute of the open file {@code from} to the open file {@code to}
   * (overlay's {@code trusted.overlay.*} markers, file capabilities, user attributes).
   */
  static void copyXattrs(int from, int to) throws Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      long size = (long) More.FLISTXATTR.invokeExact(state, from, MemorySegment.NULL, 0L);
      if (size < 0) {
        int e = errno(state);
        if (e == EOPNOTSUPP) {
          return;
        }
        throw new Errno("flistxattr", e);
      }
      if (size == 0) {
        return;
      }
      MemorySegment names = arena.allocate(size);
      size = (long) More.FLISTXATTR.invokeExact(state, from, names, size);
      if (size < 0) {
        throw new Errno("flistxattr", errno(state));
      }
      long start = 0;
      for (long k = 0; k < size; k++) {
        if (names.get(ValueLayout.JAVA_BYTE, k) != 0) {
          continue;
        }
        MemorySegment name = names.asSlice(start, k - start + 1);
        start = k + 1;
        long len = (long) More.FGETXATTR.invokeExact(state, from, name, MemorySegment.NULL, 0L);
        if (len < 0) {
          throw new Errno("fgetxattr", errno(state));
        }
        MemorySegment value = arena.allocate(Math.max(1, len));
        len = (long) More.FGETXATTR.invokeExact(state, from, name, value, len);
        if (len < 0) {
          throw new Errno("fgetxattr", errno(state));
        }
        if ((int) More.FSETXATTR.invokeExact(state, to, name, value, len, 0) != 0) {
          throw new Errno("fsetxattr", errno(state));
        }
      }
    } catch (Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  // ---- helpers ------------------------------------------------------------------------------

  private static int errno(MemorySegment state) {
    return (int) ERRNO.get(state, 0L);
  }

  private static MemorySegment cString(Arena arena, byte[] bytes) {
    MemorySegment s = arena.allocate(bytes.length + 1L);
    MemorySegment.copy(bytes, 0, s, ValueLayout.JAVA_BYTE, 0, bytes.length);
    s.set(ValueLayout.JAVA_BYTE, bytes.length, (byte) 0);
    return s;
  }

  public static String strerror(int errno) {
    if (STRERROR == null) {
      return "errno " + errno;
    }
    try {
      MemorySegment s = (MemorySegment) STRERROR.invokeExact(errno);
      return s.reinterpret(256).getString(0);
    } catch (Throwable t) {
      return "errno " + errno;
    }
  }
}
