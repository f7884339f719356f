package dev.sandbox4j.runtime.internal.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.time.Instant;

/**
 * What acting on a tree from descriptors only ({@link Beneath}, {@link Trees}) needs beyond {@link
 * NativeFs}: reading and writing an open file, ownership, mode and times, symlinks and hard links,
 * special files. Linked lazily, on first use, so that a host without one of them still has {@link
 * NativeFs}. Every call returns or throws {@link NativeFs.Errno}.
 */
final class DescriptorCalls {
  private DescriptorCalls() {}

  /** Linked on first use. */
  private static final class Linked {
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

    static {
      ValueLayout i = ValueLayout.JAVA_INT;
      ValueLayout l = ValueLayout.JAVA_LONG;
      ValueLayout a = ValueLayout.ADDRESS;
      READ = Libc.downcall("read", FunctionDescriptor.of(l, i, a, l));
      WRITE = Libc.downcall("write", FunctionDescriptor.of(l, i, a, l));
      FCHOWN = Libc.downcall("fchown", FunctionDescriptor.of(i, i, i, i));
      FCHOWNAT = Libc.downcall("fchownat", FunctionDescriptor.of(i, i, a, i, i, i));
      FCHMODAT = Libc.downcall("fchmodat", FunctionDescriptor.of(i, i, a, i, i));
      UTIMENSAT = Libc.downcall("utimensat", FunctionDescriptor.of(i, i, a, a, i));
      FUTIMENS = Libc.downcall("futimens", FunctionDescriptor.of(i, i, a));
      SYMLINKAT = Libc.downcall("symlinkat", FunctionDescriptor.of(i, a, i, a));
      LINKAT = Libc.downcall("linkat", FunctionDescriptor.of(i, i, a, i, a, i));
      MKNODAT = Libc.downcall("mknodat", FunctionDescriptor.of(i, i, a, i, l));
    }
  }

  /**
   * Reads up to {@code max} bytes from the open file {@code fd} (from its offset); fewer at EOF.
   */
  static byte[] read(int fd, int max) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment buf = arena.allocate(Math.max(1, max));
      long done = 0;
      while (done < max) {
        long n = (long) Linked.READ.invokeExact(state, fd, buf.asSlice(done), (long) max - done);
        if (n < 0) {
          if (Libc.errno(state) == NativeFs.EINTR) {
            continue;
          }
          throw new NativeFs.Errno("read", Libc.errno(state));
        }
        if (n == 0) {
          break;
        }
        done += n;
      }
      return buf.asSlice(0, done).toArray(ValueLayout.JAVA_BYTE);
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Writes all of {@code data} to the open file {@code fd}. */
  static void write(int fd, byte[] data) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment buf = arena.allocate(Math.max(1, data.length));
      MemorySegment.copy(data, 0, buf, ValueLayout.JAVA_BYTE, 0, data.length);
      long done = 0;
      while (done < data.length) {
        long n =
            (long)
                Linked.WRITE.invokeExact(state, fd, buf.asSlice(done), (long) data.length - done);
        if (n < 0) {
          if (Libc.errno(state) == NativeFs.EINTR) {
            continue;
          }
          throw new NativeFs.Errno("write", Libc.errno(state));
        }
        done += n;
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  static void fchown(int fd, int uid, int gid) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if ((int) Linked.FCHOWN.invokeExact(state, fd, uid, gid) != 0) {
        throw new NativeFs.Errno("fchown", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Owner of {@code name} in {@code dir} itself (a symlink is not followed). */
  static void lchownAt(int dir, byte[] name, int uid, int gid) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r =
          (int)
              Linked.FCHOWNAT.invokeExact(
                  state, dir, Libc.cString(arena, name), uid, gid, NativeFs.AT_SYMLINK_NOFOLLOW);
      if (r != 0) {
        throw new NativeFs.Errno("fchownat", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Mode of {@code name} in {@code dir}: only for a name the caller just made, that is not a
   * symlink (fchmodat follows one).
   */
  static void chmodAt(int dir, byte[] name, int mode) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if ((int) Linked.FCHMODAT.invokeExact(state, dir, Libc.cString(arena, name), mode, 0) != 0) {
        throw new NativeFs.Errno("fchmodat", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Access and modification times of {@code name} in {@code dir} itself (never a link's target).
   */
  static void setTimesAt(int dir, byte[] name, Instant accessed, Instant modified)
      throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment times = timespecs(arena, accessed, modified);
      int r =
          (int)
              Linked.UTIMENSAT.invokeExact(
                  state, dir, Libc.cString(arena, name), times, NativeFs.AT_SYMLINK_NOFOLLOW);
      if (r != 0) {
        throw new NativeFs.Errno("utimensat", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Access and modification times of the open file {@code fd}. */
  static void setTimes(int fd, Instant accessed, Instant modified) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r = (int) Linked.FUTIMENS.invokeExact(state, fd, timespecs(arena, accessed, modified));
      if (r != 0) {
        throw new NativeFs.Errno("futimens", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
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
  static void symlinkat(byte[] target, int dir, byte[] name) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r =
          (int)
              Linked.SYMLINKAT.invokeExact(
                  state, Libc.cString(arena, target), dir, Libc.cString(arena, name));
      if (r != 0) {
        throw new NativeFs.Errno("symlinkat", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** A new name {@code name} in {@code dir} for the open file {@code fd} (a hard link). */
  static void linkFd(int fd, int dir, byte[] name) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r =
          (int)
              Linked.LINKAT.invokeExact(
                  state,
                  fd,
                  Libc.cString(arena, new byte[0]),
                  dir,
                  Libc.cString(arena, name),
                  NativeFs.AT_EMPTY_PATH);
      if (r != 0) {
        throw new NativeFs.Errno("linkat", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** {@code mknodat(dir, name, mode, makedev(major, minor))}: a FIFO, socket or device node. */
  static void mknodat(int dir, byte[] name, int mode, int major, int minor) throws NativeFs.Errno {
    long dev =
        ((long) (major & 0xfffff000) << 32)
            | ((long) (major & 0xfff) << 8)
            | ((long) (minor & 0xffffff00) << 12)
            | (minor & 0xff);
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if ((int) Linked.MKNODAT.invokeExact(state, dir, Libc.cString(arena, name), mode, dev) != 0) {
        throw new NativeFs.Errno("mknodat", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }
}
