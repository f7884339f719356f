package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Looks paths up in a sandbox's root filesystem from the host the way the sandbox would see them:
 * {@code openat2(2)} with {@code RESOLVE_IN_ROOT} from a descriptor of the root, so an image's
 * {@code /bin -> usr/bin} or an absolute link is followed inside it, never into the host, even if
 * the sandbox swaps links meanwhile.
 */
final class RootfsPaths {
  /** The most of an image's {@code /etc/passwd} or {@code /etc/group} the engine reads. */
  static final int MAX_ACCOUNTS_FILE = 1 << 20;

  private RootfsPaths() {}

  /**
   * Whether {@code path} in {@code root} is a regular file that someone may execute. Without native
   * access, assumed (the runtime's own failure to start it says then).
   */
  static boolean isExecutable(Path root, String path) throws IOException {
    if (!NativeFs.AVAILABLE) {
      return true;
    }
    int rootFd = openRoot(root);
    try {
      return isExecutable(rootFd, path);
    } finally {
      NativeFs.close(rootFd);
    }
  }

  private static boolean isExecutable(int rootFd, String path) {
    try {
      int fd =
          NativeFs.openInRoot(rootFd, path.getBytes(StandardCharsets.UTF_8), NativeFs.O_PATH, 0);
      try {
        NativeFs.Stat st = NativeFs.fstat(fd);
        return st.isRegular() && (st.mode() & 0111) != 0;
      } finally {
        NativeFs.close(fd);
      }
    } catch (NativeFs.Errno e) {
      return false;
    }
  }

  /** Whether {@code root} is a mounted overlay: a sandbox's root, not its empty mount point. */
  static boolean isMounted(Path root) throws IOException {
    if (!NativeFs.AVAILABLE) {
      return true;
    }
    int rootFd = openRoot(root);
    try {
      return NativeFs.isOverlay(rootFd);
    } catch (NativeFs.Errno e) {
      throw new IOException("cannot check the root " + root + ": " + e.getMessage());
    } finally {
      NativeFs.close(rootFd);
    }
  }

  /**
   * Where {@code program} (a name without {@code /}) is in {@code root}, looked up in the
   * directories of {@code path} (a {@code PATH} value) as a shell would: the first executable
   * regular file. Empty if none is.
   */
  static Optional<String> findOnPath(Path root, String program, String path) throws IOException {
    int rootFd = openRoot(root);
    try {
      for (String dir : path.split(":")) {
        if (!dir.startsWith("/")) {
          continue; // a relative PATH entry is relative to a directory we cannot know here
        }
        String candidate = (dir.endsWith("/") ? dir : dir + "/") + program;
        if (isExecutable(rootFd, candidate)) {
          return Optional.of(candidate);
        }
      }
      return Optional.empty();
    } finally {
      NativeFs.close(rootFd);
    }
  }

  /**
   * The text of regular file {@code path} in {@code root} (UTF-8), if there is one; at most {@code
   * max} bytes, else an IOException. Read as root on the host, but only a regular file found inside
   * the root is opened: no FIFO or device can block or feed the read.
   */
  static Optional<String> readSmallFile(Path root, String path, int max) throws IOException {
    int rootFd = openRoot(root);
    try {
      int fd;
      try {
        fd = NativeFs.openInRoot(rootFd, path.getBytes(StandardCharsets.UTF_8), NativeFs.O_PATH, 0);
      } catch (NativeFs.Errno e) {
        if (e.errno == NativeFs.ENOENT || e.errno == NativeFs.ENOTDIR) {
          return Optional.empty();
        }
        throw new IOException("cannot open " + path + ": " + e.getMessage());
      }
      try {
        NativeFs.Stat st = NativeFs.fstat(fd);
        if (!st.isRegular()) {
          throw new IOException(path + " is not a regular file");
        }
        if (st.size() > max) {
          throw new IOException(path + " is larger than " + max + " bytes");
        }
        // Reopened through the descriptor's own /proc link: the file found inside the root.
        try (InputStream in = new FileInputStream("/proc/self/fd/" + fd)) {
          byte[] content = in.readNBytes(max + 1);
          if (content.length > max) {
            throw new IOException(path + " is larger than " + max + " bytes");
          }
          return Optional.of(new String(content, StandardCharsets.UTF_8));
        }
      } catch (NativeFs.Errno e) {
        throw new IOException("cannot read " + path + ": " + e.getMessage());
      } finally {
        NativeFs.close(fd);
      }
    } finally {
      NativeFs.close(rootFd);
    }
  }

  /**
   * The users of the image in {@code root}, from its {@code /etc/passwd} and {@code /etc/group}.
   */
  static ImageUsers users(Path root, String image) throws IOException {
    if (!NativeFs.AVAILABLE) {
      throw new IOException("native access is off: cannot read the image's /etc/passwd");
    }
    return ImageUsers.of(
        image,
        readSmallFile(root, "/etc/passwd", MAX_ACCOUNTS_FILE).orElse(null),
        readSmallFile(root, "/etc/group", MAX_ACCOUNTS_FILE).orElse(null));
  }

  private static int openRoot(Path root) throws IOException {
    try {
      return NativeFs.openHostDirectory(root.toString());
    } catch (NativeFs.Errno e) {
      throw new IOException("cannot open the root " + root + ": " + e.getMessage());
    }
  }
}
