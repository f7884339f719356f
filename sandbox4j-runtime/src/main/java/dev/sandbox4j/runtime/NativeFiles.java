package dev.sandbox4j.runtime;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The few file operations the JDK lacks and image layers need: overlayfs whiteouts (character
 * devices 0/0, made with {@code mknod}) and opaque directories (the {@code trusted.overlay.opaque}
 * extended attribute; the JDK's attribute view only reaches {@code user.*}). Calls libc through
 * {@code java.lang.foreign}, so the JVM needs {@code --enable-native-access=ALL-UNNAMED}, as the
 * rest of the engine does. Never follows a symlink at the last component.
 */
final class NativeFiles {
  /** The xattr that makes a directory of an overlay layer hide the layers below it. */
  static final String OPAQUE = "trusted.overlay.opaque";

  private static final int S_IFCHR = 0020000;
  private static final int ENODATA = 61;
  private static final int ERANGE = 34;

  private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

  private static final MethodHandle MKNOD;
  private static final MethodHandle LSETXATTR;
  private static final MethodHandle LGETXATTR;
  private static final MethodHandle STRERROR;

  static {
    Linker linker = Linker.nativeLinker();
    var libc = linker.defaultLookup();
    Linker.Option errno = Linker.Option.captureCallState("errno");
    MKNOD =
        linker.downcallHandle(
            libc.find("mknod").orElseThrow(),
            FunctionDescriptor.of(
                ValueLayout.JAVA_INT,
                ValueLayout.ADDRESS,
                ValueLayout.JAVA_INT,
                ValueLayout.JAVA_LONG),
            errno);
    LSETXATTR =
        linker.downcallHandle(
            libc.find("lsetxattr").orElseThrow(),
            FunctionDescriptor.of(
                ValueLayout.JAVA_INT,
                ValueLayout.ADDRESS,
                ValueLayout.ADDRESS,
                ValueLayout.ADDRESS,
                ValueLayout.JAVA_LONG,
                ValueLayout.JAVA_INT),
            errno);
    LGETXATTR =
        linker.downcallHandle(
            libc.find("lgetxattr").orElseThrow(),
            FunctionDescriptor.of(
                ValueLayout.JAVA_LONG,
                ValueLayout.ADDRESS,
                ValueLayout.ADDRESS,
                ValueLayout.ADDRESS,
                ValueLayout.JAVA_LONG),
            errno);
    STRERROR =
        linker.downcallHandle(
            libc.find("strerror").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
  }

  private NativeFiles() {}

  /** Creates an overlayfs whiteout at {@code path}: a character device 0/0, mode 0. */
  static void mknodWhiteout(Path path) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r = (int) MKNOD.invokeExact(state, cString(arena, path), S_IFCHR, 0L);
      if (r != 0) {
        throw failure("mknod", path, (int) ERRNO.get(state, 0L));
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Sets extended attribute {@code name} of {@code path} itself (not a symlink's target). */
  static void setXattr(Path path, String name, byte[] value) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment data = arena.allocate(Math.max(1, value.length));
      MemorySegment.copy(value, 0, data, ValueLayout.JAVA_BYTE, 0, value.length);
      int r =
          (int)
              LSETXATTR.invokeExact(
                  state,
                  cString(arena, path),
                  arena.allocateFrom(name),
                  data,
                  (long) value.length,
                  0);
      if (r != 0) {
        throw failure("setxattr " + name, path, (int) ERRNO.get(state, 0L));
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Extended attribute {@code name} of {@code path} itself, or empty if it has none. */
  static Optional<byte[]> getXattr(Path path, String name) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment file = cString(arena, path);
      MemorySegment attr = arena.allocateFrom(name);
      for (long size = 256; ; size *= 16) {
        MemorySegment buffer = arena.allocate(size);
        long n = (long) LGETXATTR.invokeExact(state, file, attr, buffer, size);
        if (n >= 0) {
          return Optional.of(buffer.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE));
        }
        int errno = (int) ERRNO.get(state, 0L);
        if (errno == ENODATA) {
          return Optional.empty();
        }
        if (errno != ERANGE || size > (1 << 20)) {
          throw failure("getxattr " + name, path, errno);
        }
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Whether {@code path} is an opaque directory of an overlay layer. */
  static boolean isOpaque(Path path) throws IOException {
    return getXattr(path, OPAQUE)
        .map(v -> new String(v, StandardCharsets.UTF_8).equals("y"))
        .orElse(false);
  }

  /** Marks directory {@code dir} opaque: in a stack of layers it hides what lower layers hold. */
  static void setOpaque(Path dir) throws IOException {
    setXattr(dir, OPAQUE, "y".getBytes(StandardCharsets.UTF_8));
  }

  private static MemorySegment cString(Arena arena, Path path) {
    return arena.allocateFrom(path.toString());
  }

  private static IOException failure(String call, Path path, int errno) {
    String message;
    try {
      MemorySegment s = (MemorySegment) STRERROR.invokeExact(errno);
      message = s.reinterpret(256).getString(0);
    } catch (Throwable t) {
      message = "errno " + errno;
    }
    return new IOException(call + " " + path + ": " + message);
  }
}
