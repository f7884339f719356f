package dev.sandbox4j.runtime.internal.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Copies one open regular file's data and extended attributes into another ({@link Trees#copy}): a
 * copy-on-write clone where the file system can, else each data extent, holes kept. Linked lazily,
 * on first use. Every call returns or throws {@link NativeFs.Errno}.
 */
final class FileCopy {
  private static final int SEEK_DATA = 3;
  private static final int SEEK_HOLE = 4;
  private static final long FICLONE = 0x40049409L;

  private FileCopy() {}

  /** Linked on first use. */
  private static final class Linked {
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
      ValueLayout i = ValueLayout.JAVA_INT;
      ValueLayout l = ValueLayout.JAVA_LONG;
      ValueLayout a = ValueLayout.ADDRESS;
      IOCTL =
          Libc.downcall(
              "ioctl", FunctionDescriptor.of(i, i, l, i), Linker.Option.firstVariadicArg(2));
      COPY_FILE_RANGE =
          Libc.downcall("copy_file_range", FunctionDescriptor.of(l, i, a, i, a, l, i));
      LSEEK = Libc.downcall("lseek", FunctionDescriptor.of(l, i, l, i));
      PREAD = Libc.downcall("pread", FunctionDescriptor.of(l, i, a, l, l));
      PWRITE = Libc.downcall("pwrite", FunctionDescriptor.of(l, i, a, l, l));
      FTRUNCATE = Libc.downcall("ftruncate", FunctionDescriptor.of(i, i, l));
      FLISTXATTR = Libc.downcall("flistxattr", FunctionDescriptor.of(l, i, a, l));
      FGETXATTR = Libc.downcall("fgetxattr", FunctionDescriptor.of(l, i, a, a, l));
      FSETXATTR = Libc.downcall("fsetxattr", FunctionDescriptor.of(i, i, a, a, l, i));
    }
  }

  /**
   * Copies the data of regular file {@code from} into the empty regular file {@code to}, both open:
   * a copy-on-write clone if {@code clone} and the file system can ({@code FICLONE}), else {@code
   * copy_file_range} of each data extent, holes left as holes (a sparse file stays sparse), then
   * the size. Returns whether to try a clone next time (false once the file system refused one).
   */
  static boolean copyData(int from, int to, long size, boolean clone) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      if (clone) {
        if ((int) Linked.IOCTL.invokeExact(state, to, FICLONE, from) == 0) {
          return true;
        }
        int e = Libc.errno(state);
        clone =
            e != NativeFs.EOPNOTSUPP
                && e != NativeFs.EXDEV
                && e != NativeFs.EINVAL
                && e != NativeFs.ENOTTY;
      }
      MemorySegment inOff = arena.allocate(ValueLayout.JAVA_LONG);
      MemorySegment outOff = arena.allocate(ValueLayout.JAVA_LONG);
      long pos = 0;
      while (pos < size) {
        long data = (long) Linked.LSEEK.invokeExact(state, from, pos, SEEK_DATA);
        if (data < 0) {
          if (Libc.errno(state) == NativeFs.ENXIO) {
            break; // only a hole is left
          }
          throw new NativeFs.Errno("lseek", Libc.errno(state));
        }
        long hole = (long) Linked.LSEEK.invokeExact(state, from, data, SEEK_HOLE);
        if (hole < 0) {
          throw new NativeFs.Errno("lseek", Libc.errno(state));
        }
        hole = Math.min(hole, size);
        inOff.set(ValueLayout.JAVA_LONG, 0, data);
        outOff.set(ValueLayout.JAVA_LONG, 0, data);
        while (inOff.get(ValueLayout.JAVA_LONG, 0) < hole) {
          long left = hole - inOff.get(ValueLayout.JAVA_LONG, 0);
          long n =
              (long) Linked.COPY_FILE_RANGE.invokeExact(state, from, inOff, to, outOff, left, 0);
          if (n < 0) {
            int e = Libc.errno(state);
            if (e == NativeFs.EINTR) {
              continue;
            }
            if (e == NativeFs.EXDEV
                || e == NativeFs.EOPNOTSUPP
                || e == NativeFs.ENOSYS
                || e == NativeFs.EINVAL) {
              // Another file system (a sandbox's disk image and the image store, or two disks):
              // the kernel copies only within one, so read and write the extent instead.
              long at = inOff.get(ValueLayout.JAVA_LONG, 0);
              inOff.set(
                  ValueLayout.JAVA_LONG, 0, copyByReadWrite(arena, state, from, to, at, hole));
              break;
            }
            throw new NativeFs.Errno("copy_file_range", e);
          }
          if (n == 0) {
            break; // the file shrank meanwhile
          }
        }
        pos = Math.max(hole, inOff.get(ValueLayout.JAVA_LONG, 0));
      }
      if ((int) Linked.FTRUNCATE.invokeExact(state, to, size) != 0) {
        throw new NativeFs.Errno("ftruncate", Libc.errno(state));
      }
      return clone;
    } catch (NativeFs.Errno | RuntimeException | Error e) {
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
      long n = (long) Linked.PREAD.invokeExact(state, from, buffer, Math.min(chunk, end - at), at);
      if (n < 0) {
        if (Libc.errno(state) == NativeFs.EINTR) {
          continue;
        }
        throw new NativeFs.Errno("pread", Libc.errno(state));
      }
      if (n == 0) {
        return at; // the file shrank meanwhile
      }
      long written = 0;
      while (written < n) {
        long w =
            (long)
                Linked.PWRITE.invokeExact(
                    state, to, buffer.asSlice(written), n - written, at + written);
        if (w < 0) {
          if (Libc.errno(state) == NativeFs.EINTR) {
            continue;
          }
          throw new NativeFs.Errno("pwrite", Libc.errno(state));
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
  static void copyXattrs(int from, int to) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      long size = (long) Linked.FLISTXATTR.invokeExact(state, from, MemorySegment.NULL, 0L);
      if (size < 0) {
        int e = Libc.errno(state);
        if (e == NativeFs.EOPNOTSUPP) {
          return;
        }
        throw new NativeFs.Errno("flistxattr", e);
      }
      if (size == 0) {
        return;
      }
      MemorySegment names = arena.allocate(size);
      size = (long) Linked.FLISTXATTR.invokeExact(state, from, names, size);
      if (size < 0) {
        throw new NativeFs.Errno("flistxattr", Libc.errno(state));
      }
      long start = 0;
      for (long k = 0; k < size; k++) {
        if (names.get(ValueLayout.JAVA_BYTE, k) != 0) {
          continue;
        }
        MemorySegment name = names.asSlice(start, k - start + 1);
        start = k + 1;
        long len = (long) Linked.FGETXATTR.invokeExact(state, from, name, MemorySegment.NULL, 0L);
        if (len < 0) {
          throw new NativeFs.Errno("fgetxattr", Libc.errno(state));
        }
        MemorySegment value = arena.allocate(Math.max(1, len));
        len = (long) Linked.FGETXATTR.invokeExact(state, from, name, value, len);
        if (len < 0) {
          throw new NativeFs.Errno("fgetxattr", Libc.errno(state));
        }
        if ((int) Linked.FSETXATTR.invokeExact(state, to, name, value, len, 0) != 0) {
          throw new NativeFs.Errno("fsetxattr", Libc.errno(state));
        }
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }
}
