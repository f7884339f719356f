package dev.sandbox4j.runtime;

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

/**
 * The system calls behind {@link SandboxDisk}, through {@code java.lang.foreign}: a sparse copy of
 * a file system image ({@code lseek(SEEK_DATA/SEEK_HOLE)} + {@code copy_file_range}), and an image
 * mounted through a loop device ({@code LOOP_CTL_GET_FREE}, {@code LOOP_CONFIGURE} with {@code
 * LO_FLAGS_AUTOCLEAR}, {@code mount(2)}): a few system calls instead of {@code cp}, {@code losetup}
 * and {@code mount} processes, which would cost tens of milliseconds of every create.
 */
final class LoopDisk {
  private LoopDisk() {}

  private static final boolean AARCH64 = "aarch64".equals(System.getProperty("os.arch"));
  private static final long SYS_IOCTL = AARCH64 ? 29 : 16;
  private static final long SYS_LSEEK = AARCH64 ? 62 : 8;
  private static final long SYS_OPENAT = AARCH64 ? 56 : 257;
  private static final long SYS_CLOSE = AARCH64 ? 57 : 3;
  private static final long SYS_FTRUNCATE = AARCH64 ? 46 : 77;
  private static final long SYS_COPY_FILE_RANGE = AARCH64 ? 285 : 326;
  private static final long SYS_MOUNT = AARCH64 ? 40 : 165;

  private static final long AT_FDCWD = -100;
  private static final long O_RDONLY = 0;
  private static final long O_RDWR = 2;
  private static final long O_CREAT = 0100;
  private static final long O_EXCL = 0200;
  private static final long O_CLOEXEC = 02000000;
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

  static final long MS_NOSUID = 2;
  static final long MS_NODEV = 4;
  static final long MS_NOATIME = 1024;

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
  static final class Failure extends Exception {
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

  private static void close(int fd) {
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
  static void sparseCopy(Path from, Path to) throws Failure {
    int in = open(from, O_RDONLY, 0);
    try {
      int out = open(to, O_RDWR | O_CREAT | O_EXCL, 0600);
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
   * Mounts the file system image {@code image} (ext4) at {@code target} through a free loop device
   * that frees itself once unmounted ({@code LO_FLAGS_AUTOCLEAR}). Returns the device's path.
   */
  static String mount(Path image, Path target, long flags, String options) throws Failure {
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
            MemorySegment source = arena.allocateFrom(device.toString(), StandardCharsets.UTF_8);
            MemorySegment at = arena.allocateFrom(target.toString(), StandardCharsets.UTF_8);
            MemorySegment type = arena.allocateFrom("ext4", StandardCharsets.UTF_8);
            MemorySegment data = arena.allocateFrom(options, StandardCharsets.UTF_8);
            // Until mounted, the open descriptor keeps the device bound; closing it after a
            // failed mount lets AUTOCLEAR unbind it.
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
