package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;

/**
 * Writes a file of a sandbox as its user: follows symlinks at the last component one by one (each
 * hop resolved in the root again), creates missing parent directories with the sandbox's umask,
 * honours the permissions of a file it replaces, and writes a temporary file that it renames over
 * the target, so a reader never sees half a file.
 */
final class SandboxFileWrites {
  private static final int MAX_SYMLINKS = 40;
  private static final SecureRandom RANDOM = new SecureRandom();

  private final RootfsCalls calls;

  SandboxFileWrites(RootfsCalls calls) {
    this.calls = calls;
  }

  /** Writes {@code content} to {@code path}, through a temporary file renamed over it. */
  void write(String path, InputStream content) {
    String temp = ".sandbox4j-write." + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    byte[] tempName = SandboxFiles.bytes(temp);
    Target target =
        calls.call(
            path,
            root -> {
              Target t = prepareWrite(root, path);
              try {
                int fd =
                    NativeFs.openat(
                        t.dir,
                        tempName,
                        NativeFs.O_WRONLY
                            | NativeFs.O_CREAT
                            | NativeFs.O_EXCL
                            | NativeFs.O_NOFOLLOW,
                        0600);
                return new Target(t.dir, t.name, t.mode, fd);
              } catch (NativeFs.Errno | RuntimeException e) {
                NativeFs.close(t.dir);
                throw e;
              }
            });
    boolean renamed = false;
    try {
      try (OutputStream out = new FileOutputStream("/proc/self/fd/" + target.temp)) {
        content.transferTo(out);
      } catch (IOException e) {
        throw new WorkspaceException("writing " + path + " failed: " + e.getMessage(), e);
      }
      calls.call(
          path,
          root -> {
            // Only now: a mode without u+w would have stopped the writing, and writing may clear
            // setuid.
            NativeFs.fchmod(target.temp, target.mode);
            NativeFs.renameat(target.dir, tempName, target.dir, SandboxFiles.bytes(target.name));
            return null;
          });
      renamed = true;
    } finally {
      try {
        if (!renamed) {
          calls.call(
              path,
              root -> {
                try {
                  NativeFs.unlinkat(target.dir, tempName, 0);
                } catch (NativeFs.Errno ignored) {
                  // gone already
                }
                return null;
              });
        }
      } catch (RuntimeException cleanup) {
        // the original failure matters more
      } finally {
        NativeFs.close(target.temp);
        NativeFs.close(target.dir);
      }
    }
  }

  /**
   * Where a write goes: the directory (open O_PATH), the name in it, the mode to give, and the
   * temporary file (open for writing, or -1).
   */
  private record Target(int dir, String name, int mode, int temp) {}

  /**
   * Follows {@code path} to the file a write replaces: symlinks at the last component are followed
   * one by one (dangling ones too), each hop resolved in the root again. Creates missing parent
   * directories. Checks that an existing target is a regular file the user may write.
   */
  private static Target prepareWrite(int root, String path) throws NativeFs.Errno {
    String current = path;
    for (int hops = 0; hops <= MAX_SYMLINKS; hops++) {
      int slash = current.lastIndexOf('/');
      String dirPath = slash <= 0 ? "/" : current.substring(0, slash);
      String name = current.substring(slash + 1);
      if (name.isEmpty() || name.equals(".") || name.equals("..")) {
        // names a directory if it resolves at all
        int fd = NativeFs.openInRoot(root, SandboxFiles.bytes(current), NativeFs.O_PATH, 0);
        NativeFs.close(fd);
        throw new WorkspaceIsDirectoryException(path, "is a directory");
      }
      int dir;
      try {
        dir = NativeFs.openInRoot(root, SandboxFiles.bytes(dirPath), SandboxFiles.dirFlags(), 0);
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.ENOENT) {
          throw e;
        }
        mkdirs(root, path, dirPath);
        dir = NativeFs.openInRoot(root, SandboxFiles.bytes(dirPath), SandboxFiles.dirFlags(), 0);
      }
      try {
        NativeFs.Stat st;
        try {
          st = NativeFs.lstatAt(dir, SandboxFiles.bytes(name));
        } catch (NativeFs.Errno e) {
          if (e.errno == NativeFs.ENOENT) {
            int kept = dir;
            dir = -1; // handed to the target
            return new Target(kept, name, 0666 & ~SandboxFiles.UMASK, -1);
          }
          throw e;
        }
        if (st.isSymlink()) {
          String link =
              new String(
                  NativeFs.readlinkat(dir, SandboxFiles.bytes(name)), StandardCharsets.UTF_8);
          current = link.startsWith("/") ? link : (dirPath.equals("/") ? "" : dirPath) + "/" + link;
          continue;
        }
        if (st.isDirectory()) {
          throw new WorkspaceIsDirectoryException(path, "is a directory");
        }
        if (!st.isRegular()) {
          throw RootfsCalls.notRegular(path);
        }
        int fd =
            NativeFs.openat(
                dir, SandboxFiles.bytes(name), NativeFs.O_PATH | NativeFs.O_NOFOLLOW, 0);
        try {
          NativeFs.Stat again = NativeFs.fstat(fd);
          if (!again.isRegular()) {
            throw RootfsCalls.notRegular(path);
          }
          // Renaming over the file would bypass its own permissions: honour them first.
          NativeFs.checkAccess(fd, NativeFs.W_OK);
          int kept = dir;
          dir = -1; // handed to the target
          return new Target(kept, name, again.mode() & 07777, -1);
        } finally {
          NativeFs.close(fd);
        }
      } finally {
        NativeFs.close(dir);
      }
    }
    throw new NativeFs.Errno("symlink", NativeFs.ELOOP);
  }

  /** mkdir -p of {@code dirPath}, where a non-directory in the way is not-a-directory. */
  /** Whether {@code path} is a directory in {@code root} (following links inside it). */
  static boolean isDirectory(int root, String path) throws NativeFs.Errno {
    int fd;
    try {
      fd = NativeFs.openInRoot(root, SandboxFiles.bytes(path), NativeFs.O_PATH, 0);
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT || e.errno == NativeFs.ENOTDIR) {
        return false;
      }
      throw e;
    }
    try {
      return NativeFs.fstat(fd).isDirectory();
    } finally {
      NativeFs.close(fd);
    }
  }

  static void mkdirs(int root, String path, String dirPath) throws NativeFs.Errno {
    for (int attempt = 0; attempt < 3; attempt++) {
      try {
        NativeFs.close(
            NativeFs.openInRoot(root, SandboxFiles.bytes(dirPath), SandboxFiles.dirFlags(), 0));
        return;
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.ENOENT || dirPath.equals("/")) {
          throw e;
        }
      }
      int slash = dirPath.lastIndexOf('/');
      String parent = slash <= 0 ? "/" : dirPath.substring(0, slash);
      String name = dirPath.substring(slash + 1);
      mkdirs(root, path, parent);
      int dir = NativeFs.openInRoot(root, SandboxFiles.bytes(parent), SandboxFiles.dirFlags(), 0);
      try {
        NativeFs.mkdirat(dir, SandboxFiles.bytes(name), 0777 & ~SandboxFiles.UMASK);
        fixDirectoryMode(dir, SandboxFiles.bytes(name));
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.EEXIST) {
          throw e;
        }
        // a dangling symlink or a file in the way: mkdir -p's "File exists"
        try {
          NativeFs.close(
              NativeFs.openInRoot(root, SandboxFiles.bytes(dirPath), SandboxFiles.dirFlags(), 0));
          return;
        } catch (NativeFs.Errno again) {
          throw new NativeFs.Errno("mkdir", NativeFs.ENOTDIR);
        }
      } finally {
        NativeFs.close(dir);
      }
    }
  }

  /** mkdirat's mode is masked with the process's umask: give the new directory the sandbox's. */
  private static void fixDirectoryMode(int dir, byte[] name) throws NativeFs.Errno {
    if ((SandboxUserThreads.PROCESS_UMASK & ~SandboxFiles.UMASK) == 0) {
      return;
    }
    int fd =
        NativeFs.openat(
            dir, name, NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW, 0);
    try {
      NativeFs.fchmod(fd, 0777 & ~SandboxFiles.UMASK);
    } finally {
      NativeFs.close(fd);
    }
  }
}
