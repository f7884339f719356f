package dev.sandbox4j.runtime.internal.linux;

import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;

/**
 * The system calls behind {@link SandboxDisk}, through {@code java.lang.foreign}: a sparse copy of
 * a file system image ({@code lseek(SEEK_DATA/SEEK_HOLE)} + {@code copy_file_range}), and an image
 * mounted through a loop device ({@code LOOP_CTL_GET_FREE}, {@code LOOP_CONFIGURE} with {@code
 * LO_FLAGS_AUTOCLEAR}, {@code mount(2)}): a few system calls instead of {@code cp}, {@code losetup}
 * and {@code mount} processes, which would cost tens of milliseconds of every create.
 */
public final class LoopDisk {
  private LoopDisk() {}

  private static final boolean AARCH64 = "aarch64".equals(System.getProperty("os.arch"));
  private static final long SYS_IOCTL = AARCH64 ? 29 : 16;
  private static final long SYS_LSEEK = AARCH64 ? 62 : 8;
  private static final long SYS_OPENAT = AARCH64 ? 56 : 257;
  private static final long SYS_CLOSE = AARCH64 ? 57 : 3;
  private static final long SYS_FTRUNCATE = AARCH64 ? 46 : 77;
  private static final long SYS_COPY_FILE_RANGE = AARCH64 ? 285 : 326;
  private static final long SYS_MOUNT = AARCH64 ? 40 : 165;
  private static final long SYS_UMOUNT2 = AARCH64 ? 39 : 166;
  private static final long SYS_STATX = AARCH64 ? 291 : 332;
  private static final long SYS_MKDIRAT = AARCH64 ? 34 : 258;
  private static final long AT_SYMLINK_NOFOLLOW = 0x100;
  private static final long STATX_SIZE_AND_BLOCKS = 0x200 | 0x400;
  private static final int STATX_BUFFER = 256;
  // The new mount API has the same numbers on every architecture.
  private static final long SYS_MOVE_MOUNT = 429;
  private static final long SYS_FSOPEN = 430;
  private static final long SYS_FSCONFIG = 431;
  private static final long SYS_FSMOUNT = 432;

  private static final long AT_FDCWD = -100;
  private static final long O_RDONLY = 0;
  private static final long O_RDWR = 2;
  private static final long O_CREAT = 0100;
  private static final long O_EXCL = 0200;
  private static final long O_CLOEXEC = 02000000;
  private static final long O_PATH = 010000000;
  private static final long O_DIRECTORY = AARCH64 ? 040000 : 0200000;
  private static final long O_NOFOLLOW = AARCH64 ? 0100000 : 0400000;
  private static final long MNT_DETACH = 2;
  private static final long FSOPEN_CLOEXEC = 1;
  private static final long FSCONFIG_SET_FLAG = 0;
  private static final long FSCONFIG_SET_STRING = 1;
  private static final long FSCONFIG_CMD_CREATE = 6;
  private static final long FSMOUNT_CLOEXEC = 1;
  private static final long MOVE_MOUNT_F_EMPTY_PATH = 4;
  private static final long SEEK_DATA = 3;
  private static final long SEEK_HOLE = 4;
  private static final int ENXIO = 6;
  private static final int EBUSY = 16;

  private static final long LOOP_CTL_GET_FREE = 0x4C82;
  private static final long LOOP_CONFIGURE = 0x4C0A;
  private static final int LO_FLAGS_AUTOCLEAR = 4;
  private static final int LOOP_CONFIG_SIZE = 304; // fd, block_size, loop_info64, 8 reserved
  private static final int LO_FLAGS_OFFSET = 8 + 52;
  private static final int LO_FILE_NAME_OFFSET = 8 + 56;

  public static final long MS_NOSUID = 2;
  public static final long MS_NODEV = 4;
  public static final long MS_NOATIME = 1024;
  public static final long MOUNT_ATTR_NOSUID = 0x2;
  public static final long MOUNT_ATTR_NODEV = 0x4;
  public static final long MOUNT_ATTR_NOATIME = 0x10;

  private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));
  private static final MethodHandle SYSCALL;

  static {
    Linker linker = Linker.nativeLinker();
    ValueLayout l = ValueLayout.JAVA_LONG;
    // syscall(2) is variadic and reads every argument as a long: pass longs only.
    SYSCALL =
        linker.downcallHandle(
            linker.defaultLookup().find("syscall").orElseThrow(),
            FunctionDescriptor.of(l, l, l, l, l, l, l, l),
            Linker.Option.captureCallState("errno"),
            Linker.Option.firstVariadicArg(1));
  }

  /** A failed system call: its name and errno. */
  public static final class Failure extends Exception {
    private static final long serialVersionUID = 1L;
    final int errno;

    Failure(String call, int errno) {
      super(call + ": errno " + errno);
      this.errno = errno;
    }
  }

  private static long call(String name, long nr, long a, long b, long c, long d, long e, long f)
      throws Failure {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      long r = (long) SYSCALL.invokeExact(state, nr, a, b, c, d, e, f);
      if (r < 0) {
        throw new Failure(name, (int) ERRNO.get(state, 0L));
      }
      return r;
    } catch (Failure | RuntimeException | Error e2) {
      throw e2;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  private static int open(Path path, long flags, long mode) throws Failure {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment p = arena.allocateFrom(path.toString(), StandardCharsets.UTF_8);
      return (int)
          call("open " + path, SYS_OPENAT, AT_FDCWD, p.address(), flags | O_CLOEXEC, mode, 0, 0);
    }
  }

  public static void close(int fd) {
    try {
      call("close", SYS_CLOSE, fd, 0, 0, 0, 0, 0);
    } catch (Failure ignored) {
      // nothing to do about it
    }
  }

  /**
   * Copies {@code from} to the new file {@code to} (mode 0600), holes kept as holes: a file system
   * image of gigabytes of which a few hundred kilobytes are written costs those kilobytes.
   */
  public static void sparseCopy(Path from, Path to) throws Failure {
    sparseCopy(from, to, O_CREAT | O_EXCL);
  }

  /** {@link #sparseCopy} into {@code to}, which exists already and is empty. */
  public static void sparseCopyInto(Path from, Path to) throws Failure {
    sparseCopy(from, to, O_NOFOLLOW);
  }

  private static void sparseCopy(Path from, Path to, long create) throws Failure {
    int in = open(from, O_RDONLY, 0);
    try {
      int out = open(to, O_RDWR | create, 0600);
      try (Arena arena = Arena.ofConfined()) {
        long size = call("lseek", SYS_LSEEK, in, 0, 2 /* SEEK_END */, 0, 0, 0);
        call("ftruncate", SYS_FTRUNCATE, out, size, 0, 0, 0, 0);
        MemorySegment offIn = arena.allocate(ValueLayout.JAVA_LONG);
        MemorySegment offOut = arena.allocate(ValueLayout.JAVA_LONG);
        long pos = 0;
        while (pos < size) {
          long data;
          try {
            data = call("lseek", SYS_LSEEK, in, pos, SEEK_DATA, 0, 0, 0);
          } catch (Failure f) {
            if (f.errno == ENXIO) {
              break; // only a hole is left
            }
            throw f;
          }
          long hole = call("lseek", SYS_LSEEK, in, data, SEEK_HOLE, 0, 0, 0);
          offIn.set(ValueLayout.JAVA_LONG, 0, data);
          offOut.set(ValueLayout.JAVA_LONG, 0, data);
          long left = hole - data;
          while (left > 0) {
            long n =
                call(
                    "copy_file_range",
                    SYS_COPY_FILE_RANGE,
                    in,
                    offIn.address(),
                    out,
                    offOut.address(),
                    left,
                    0);
            if (n == 0) {
              break;
            }
            left -= n;
          }
          pos = hole;
        }
      } finally {
        close(out);
      }
    } finally {
      close(in);
    }
  }

  /**
   * How much more of its file system the file {@code image} can take: its size minus the bytes
   * allocated to it ({@code statx} size and blocks); 0 for a file that is not sparse.
   */
  public static long unallocatedBytes(Path image) throws Failure {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment p = arena.allocateFrom(image.toString(), StandardCharsets.UTF_8);
      MemorySegment buf = arena.allocate(STATX_BUFFER, 8);
      call(
          "statx " + image,
          SYS_STATX,
          AT_FDCWD,
          p.address(),
          AT_SYMLINK_NOFOLLOW,
          STATX_SIZE_AND_BLOCKS,
          buf.address(),
          0);
      long size = buf.get(ValueLayout.JAVA_LONG, 40);
      long blocks = buf.get(ValueLayout.JAVA_LONG, 48);
      return Math.max(0, size - blocks * 512);
    }
  }

  /** What is done with a bound loop device: mount it and return what the caller keeps. */
  private interface OnDevice<T> {
    T use(Path device, Arena arena) throws Failure;
  }

  /**
   * Mounts the file system image {@code image} (ext4) at {@code target} through a free loop device
   * that frees itself once unmounted ({@code LO_FLAGS_AUTOCLEAR}). Returns the device's path.
   */
  public static String mount(Path image, Path target, long flags, String options) throws Failure {
    return withLoop(
        image,
        (device, arena) -> {
          MemorySegment source = arena.allocateFrom(device.toString(), StandardCharsets.UTF_8);
          MemorySegment at = arena.allocateFrom(target.toString(), StandardCharsets.UTF_8);
          MemorySegment type = arena.allocateFrom("ext4", StandardCharsets.UTF_8);
          MemorySegment data = arena.allocateFrom(options, StandardCharsets.UTF_8);
          call(
              "mount " + target,
              SYS_MOUNT,
              source.address(),
              at.address(),
              type.address(),
              flags,
              data.address(),
              0);
          return device.toString();
        });
  }

  /**
   * Mounts the ext4 image {@code image} through a self-freeing loop device as {@link #mount} does,
   * but attached nowhere ({@code fsopen}, {@code fsconfig}, {@code fsmount}): returns a descriptor
   * of the detached mount, which {@link #attach} puts in place later. While unattached it is in no
   * mount table; closing the descriptor (or the process's end) unmounts it and frees its device.
   * {@code flags} are {@code MOUNT_ATTR_*}; {@code flagOptions} are ext4's options without a value,
   * {@code stringOptions} those with one.
   */
  public static int mountDetached(
      Path image, long flags, java.util.List<String> flagOptions, Map<String, String> stringOptions)
      throws Failure {
    return withLoop(
        image,
        (device, arena) -> {
          int fs =
              (int)
                  call(
                      "fsopen ext4",
                      SYS_FSOPEN,
                      arena.allocateFrom("ext4", StandardCharsets.UTF_8).address(),
                      FSOPEN_CLOEXEC,
                      0,
                      0,
                      0,
                      0);
          try {
            configure(fs, arena, FSCONFIG_SET_STRING, "source", device.toString());
            for (String flag : flagOptions) {
              configure(fs, arena, FSCONFIG_SET_FLAG, flag, null);
            }
            for (Map.Entry<String, String> option : stringOptions.entrySet()) {
              configure(fs, arena, FSCONFIG_SET_STRING, option.getKey(), option.getValue());
            }
            call("fsconfig create", SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, 0, 0, 0, 0);
            return (int) call("fsmount", SYS_FSMOUNT, fs, FSMOUNT_CLOEXEC, flags, 0, 0, 0);
          } finally {
            close(fs);
          }
        });
  }

  private static void configure(int fs, Arena arena, long command, String key, String value)
      throws Failure {
    MemorySegment k = arena.allocateFrom(key, StandardCharsets.UTF_8);
    long v = value == null ? 0 : arena.allocateFrom(value, StandardCharsets.UTF_8).address();
    call("fsconfig " + key, SYS_FSCONFIG, fs, command, k.address(), v, 0, 0);
  }

  /** Attaches the detached mount {@code mount} ({@link #mountDetached}) at {@code target}. */
  public static void attach(int mount, Path target) throws Failure {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment empty = arena.allocateFrom("", StandardCharsets.UTF_8);
      MemorySegment at = arena.allocateFrom(target.toString(), StandardCharsets.UTF_8);
      call(
          "move_mount " + target,
          SYS_MOVE_MOUNT,
          mount,
          empty.address(),
          AT_FDCWD,
          at.address(),
          MOVE_MOUNT_F_EMPTY_PATH,
          0);
    }
  }

  /** Makes the directory {@code name} (mode 0755 less the umask) in the directory {@code dir}. */
  public static void mkdirAt(int dir, String name) throws Failure {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment n = arena.allocateFrom(name, StandardCharsets.UTF_8);
      call("mkdirat " + name, SYS_MKDIRAT, dir, n.address(), 0755, 0, 0, 0);
    }
  }

  /**
   * Detaches the mount at {@code target} from the mount table at once and returns a descriptor that
   * keeps it alive: the file system's real unmount (its journal flushed, its loop device freed, the
   * image's blocks released if it was deleted) happens when that descriptor is closed, which the
   * caller may do off its own path. Nothing else can reach the file system meanwhile.
   */
  public static int detach(Path target) throws Failure {
    int keep = open(target, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment at = arena.allocateFrom(target.toString(), StandardCharsets.UTF_8);
      call("umount2 " + target, SYS_UMOUNT2, at.address(), MNT_DETACH, 0, 0, 0, 0);
      return keep;
    } catch (Failure | RuntimeException e) {
      close(keep);
      throw e;
    }
  }

  private static <T> T withLoop(Path image, OnDevice<T> onDevice) throws Failure {
    int file = open(image, O_RDWR, 0);
    try {
      int control = open(Path.of("/dev/loop-control"), O_RDWR, 0);
      try (Arena arena = Arena.ofConfined()) {
        for (int attempt = 0; ; attempt++) {
          long n = call("LOOP_CTL_GET_FREE", SYS_IOCTL, control, LOOP_CTL_GET_FREE, 0, 0, 0, 0);
          Path device = Path.of("/dev/loop" + n);
          int loop;
          try {
            loop = open(device, O_RDWR, 0);
          } catch (Failure f) {
            if (attempt < 20) {
              continue; // its node is being made, or it was taken and removed meanwhile
            }
            throw f;
          }
          try {
            MemorySegment config = arena.allocate(LOOP_CONFIG_SIZE, 8);
            config.fill((byte) 0);
            config.set(ValueLayout.JAVA_INT, 0, file);
            config.set(ValueLayout.JAVA_INT, LO_FLAGS_OFFSET, LO_FLAGS_AUTOCLEAR);
            byte[] name = image.toString().getBytes(StandardCharsets.UTF_8);
            MemorySegment.copy(
                name,
                0,
                config,
                ValueLayout.JAVA_BYTE,
                LO_FILE_NAME_OFFSET,
                Math.min(63, name.length));
            try {
              call("LOOP_CONFIGURE", SYS_IOCTL, loop, LOOP_CONFIGURE, config.address(), 0, 0, 0);
            } catch (Failure f) {
              if (f.errno == EBUSY && attempt < 20) {
                continue; // another process took this device between GET_FREE and CONFIGURE
              }
              throw f;
            }
            // Until mounted, the open descriptor keeps the device bound; closing it after a
            // failed mount lets AUTOCLEAR unbind it.
            return onDevice.use(device, arena);
          } finally {
            close(loop);
          }
        }
      } finally {
        close(control);
      }
    } finally {
      close(file);
    }
  }
}
