package dev.sandbox4j.runtime.internal.linux;

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
import java.util.Locale;

/**
 * The link to libc that the system calls of this package go through: the downcall handles, each
 * linked once when this class loads (static finals, so the JIT sees constants), the errno each call
 * leaves behind, and the C strings the calls take.
 *
 * <p>Only Linux on x86-64 and AArch64 is linked, and only with native access ({@code
 * --enable-native-access=ALL-UNNAMED}): elsewhere {@link #AVAILABLE} is false, every handle is
 * null, and no caller reaches one ({@link NativeFs#AVAILABLE} says so first). The rarer calls are
 * linked lazily by the classes that make them ({@link DescriptorCalls}, {@link FileCopy}).
 */
final class Libc {
  static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

  static final boolean AVAILABLE;

  static final MethodHandle SYSCALL_4; // openat2
  static final MethodHandle SYSCALL_3; // getdents64
  static final MethodHandle SYSCALL_2; // setgroups
  static final MethodHandle OPENAT;
  static final MethodHandle STATX;
  static final MethodHandle FSTATFS;
  static final MethodHandle FCHMOD;
  static final MethodHandle RENAMEAT;
  static final MethodHandle UNLINKAT;
  static final MethodHandle MKDIRAT;
  static final MethodHandle READLINKAT;
  static final MethodHandle CLOSE;
  static final MethodHandle SETFSUID;
  static final MethodHandle SETFSGID;
  static final MethodHandle PRCTL;
  static final MethodHandle STRERROR;
  static final MethodHandle SYSCALL_FACCESS; // faccessat2(long, ptr, long, long)
  static final MethodHandle MKNOD;
  static final MethodHandle LSETXATTR;
  static final MethodHandle LGETXATTR;
  static final MethodHandle MOUNT;
  static final MethodHandle UMOUNT2;
  static final MethodHandle SYSCALL_5; // mount_setattr

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
  }

  private Libc() {}

  /**
   * A handle on libc's {@code name} that captures errno: for the calls a class links lazily, in a
   * holder class of its own, so that a host without one of them still has the others.
   */
  static MethodHandle downcall(String name, FunctionDescriptor d, Linker.Option... more) {
    Linker linker = Linker.nativeLinker();
    Linker.Option[] options = new Linker.Option[more.length + 1];
    options[0] = Linker.Option.captureCallState("errno");
    System.arraycopy(more, 0, options, 1, more.length);
    return linker.downcallHandle(linker.defaultLookup().find(name).orElseThrow(), d, options);
  }

  static int errno(MemorySegment state) {
    return (int) ERRNO.get(state, 0L);
  }

  static MemorySegment cString(Arena arena, byte[] bytes) {
    MemorySegment s = arena.allocate(bytes.length + 1L);
    MemorySegment.copy(bytes, 0, s, ValueLayout.JAVA_BYTE, 0, bytes.length);
    s.set(ValueLayout.JAVA_BYTE, bytes.length, (byte) 0);
    return s;
  }

  static byte[] utf8(Path path) {
    return path.toString().getBytes(StandardCharsets.UTF_8);
  }
}
