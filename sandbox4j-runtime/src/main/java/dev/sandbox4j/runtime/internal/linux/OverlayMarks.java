package dev.sandbox4j.runtime.internal.linux;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What the JDK lacks and image layers need: overlayfs whiteouts (character devices 0/0, made with
 * {@code mknod}) and opaque directories (the {@code trusted.overlay.opaque} xattr; the JDK's
 * attribute view only reaches {@code user.*}). By host path, never following a symlink at the last
 * component. Fails with an {@link IOException} naming the path.
 */
public final class OverlayMarks {
  private OverlayMarks() {}

  /** The xattr that makes a directory of an overlay layer hide the layers below it. */
  static final String OPAQUE = "trusted.overlay.opaque";

  private static final String REDIRECT = "trusted.overlay.redirect";

  private static final int S_IFCHR = 0020000;
  private static final int ENODATA = 61;
  private static final int ERANGE = 34;

  /** Creates an overlayfs whiteout at {@code path}: a character device 0/0, mode 0. */
  public static void mknodWhiteout(Path path) throws IOException {
    requireAvailable();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r =
          (int) Libc.MKNOD.invokeExact(state, Libc.cString(arena, Libc.utf8(path)), S_IFCHR, 0L);
      if (r != 0) {
        throw layerFailure("mknod", path, Libc.errno(state));
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
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment data = arena.allocate(Math.max(1, value.length));
      MemorySegment.copy(value, 0, data, ValueLayout.JAVA_BYTE, 0, value.length);
      int r =
          (int)
              Libc.LSETXATTR.invokeExact(
                  state,
                  Libc.cString(arena, Libc.utf8(path)),
                  arena.allocateFrom(name),
                  data,
                  (long) value.length,
                  0);
      if (r != 0) {
        throw layerFailure("setxattr " + name, path, Libc.errno(state));
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
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment file = Libc.cString(arena, Libc.utf8(path));
      MemorySegment attr = arena.allocateFrom(name);
      for (long size = 256; ; size *= 16) {
        MemorySegment buffer = arena.allocate(size);
        long n = (long) Libc.LGETXATTR.invokeExact(state, file, attr, buffer, size);
        if (n >= 0) {
          return Optional.of(buffer.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE));
        }
        int errno = Libc.errno(state);
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

  /**
   * Whether directory {@code path} of an upper layer is one overlayfs renamed with {@code
   * redirect_dir}: its {@code trusted.overlay.redirect} attribute names a directory of the layers
   * below whose content it shows.
   */
  public static boolean isRedirected(Path path) throws IOException {
    return getXattr(path, REDIRECT).isPresent();
  }

  /** Marks directory {@code dir} opaque: in a stack of layers it hides what lower layers hold. */
  public static void setOpaque(Path dir) throws IOException {
    setXattr(dir, OPAQUE, "y".getBytes(StandardCharsets.UTF_8));
  }

  private static void requireAvailable() throws IOException {
    if (!Libc.AVAILABLE) {
      throw new IOException(
          "native file operations are unavailable: Linux on amd64/aarch64 with"
              + " --enable-native-access=ALL-UNNAMED is needed");
    }
  }

  private static IOException layerFailure(String call, Path path, int errno) {
    return new IOException(call + " " + path + ": " + NativeFs.strerror(errno));
  }
}
