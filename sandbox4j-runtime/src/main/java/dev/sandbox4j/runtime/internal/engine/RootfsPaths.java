package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * Looks paths up in a sandbox's root filesystem from the host the way the sandbox would see them:
 * {@code openat2(2)} with {@code RESOLVE_IN_ROOT} from a descriptor of the root, so an image's
 * {@code /bin -> usr/bin} or an absolute link is followed inside it, never into the host, even if
 * the sandbox swaps links meanwhile.
 */
final class RootfsPaths {
  private RootfsPaths() {}

  /**
   * Fails unless {@code root} has an executable {@code /bin/sh}: every command of a sandbox is
   * started by it.
   */
  static void requireShell(Path root, String image) throws IOException {
    if (!NativeFs.AVAILABLE) {
      return; // the runtime's own failure to start /bin/sh says it then
    }
    boolean ok;
    int rootFd;
    try {
      rootFd = NativeFs.openHostDirectory(root.toString());
    } catch (NativeFs.Errno e) {
      throw new IOException("cannot open the root " + root + ": " + e.getMessage());
    }
    try {
      int sh =
          NativeFs.openInRoot(
              rootFd, "/bin/sh".getBytes(StandardCharsets.UTF_8), NativeFs.O_PATH, 0);
      try {
        NativeFs.Stat st = NativeFs.fstat(sh);
        ok = st.isRegular() && (st.mode() & 0111) != 0;
      } finally {
        NativeFs.close(sh);
      }
    } catch (NativeFs.Errno e) {
      ok = false;
    } finally {
      NativeFs.close(rootFd);
    }
    if (!ok) {
      throw new WorkspaceException(
          "image '"
              + image
              + "' has no executable /bin/sh: a sandbox runs every command with /bin/sh, so an"
              + " imported image must provide it (and setsid, and for the file API GNU coreutils"
              + " and findutils)");
    }
  }
}
