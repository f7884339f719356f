package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Removes and renames files of a sandbox as its user, acting on one name in a directory resolved in
 * the root ({@code unlinkat}, {@code renameat}) and never following a symlink; a removed tree is
 * walked with {@code O_NOFOLLOW} from its parent's descriptor. Refuses to remove, move or replace
 * the working directory or one of its ancestors. What the kernel cannot do here goes to {@code
 * fallback}: a rename across the overlay's layers (EXDEV), the rest of a tree deeper than {@value
 * #MAX_DEPTH} directories.
 */
final class SandboxFileMoves {
  static final int MAX_DEPTH = 256;

  private final RootfsCalls calls;
  private final String workingDirectory;
  private final SupportsFileSystem fallback;

  SandboxFileMoves(RootfsCalls calls, String workingDirectory, SupportsFileSystem fallback) {
    this.calls = calls;
    this.workingDirectory = workingDirectory;
    this.fallback = fallback;
  }

  /**
   * Removes {@code path} (a symlink itself, never its target); a directory's tree if {@code
   * recursive}.
   */
  void remove(String path, boolean recursive) {
    boolean tooDeep =
        calls.call(
            path,
            root -> {
              Entry entry = entry(root, path, true);
              try {
                if (entry.stat.isSymlink()) {
                  NativeFs.unlinkat(entry.dir, entry.name, 0); // only the link, never its target
                  return false;
                }
                guard(root, path, entry.stat);
                if (!entry.stat.isDirectory()) {
                  NativeFs.unlinkat(entry.dir, entry.name, 0);
                  return false;
                }
                if (!recursive) {
                  try {
                    NativeFs.unlinkat(entry.dir, entry.name, NativeFs.AT_REMOVEDIR);
                  } catch (NativeFs.Errno e) {
                    if (e.errno == NativeFs.EEXIST) { // rmdir(2)'s other word for not empty
                      throw new WorkspaceDirectoryNotEmptyException(path, "directory not empty");
                    }
                    throw e;
                  }
                  return false;
                }
                return !removeTree(entry.dir, entry.name, 0);
              } finally {
                NativeFs.close(entry.dir);
              }
            });
    if (tooDeep) {
      fallback.remove(path, true); // rm -rf finishes what is left
    }
  }

  /**
   * Removes directory {@code name} in {@code dir} and everything in it, never following a symlink:
   * each directory is opened with O_NOFOLLOW relative to its parent's descriptor. Returns false,
   * having removed what it could, if the tree is deeper than {@link #MAX_DEPTH}.
   */
  private static boolean removeTree(int dir, byte[] name, int depth) throws NativeFs.Errno {
    if (depth > MAX_DEPTH) {
      return false;
    }
    int fd;
    try {
      fd =
          NativeFs.openat(
              dir, name, NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW, 0);
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ELOOP || e.errno == NativeFs.ENOTDIR) {
        NativeFs.unlinkat(dir, name, 0); // swapped for a symlink or a file meanwhile
        return true;
      }
      if (e.errno == NativeFs.ENOENT) {
        return true;
      }
      throw e;
    }
    try {
      for (int pass = 0; ; pass++) {
        List<byte[]> names = NativeFs.readDirectory(fd);
        for (byte[] child : names) {
          try {
            NativeFs.unlinkat(fd, child, 0);
          } catch (NativeFs.Errno e) {
            if (e.errno == NativeFs.EISDIR || e.errno == NativeFs.EPERM) {
              NativeFs.Stat st;
              try {
                st = NativeFs.lstatAt(fd, child);
              } catch (NativeFs.Errno gone) {
                continue;
              }
              if (!st.isDirectory()) {
                throw e;
              }
              if (!removeTree(fd, child, depth + 1)) {
                return false;
              }
            } else if (e.errno != NativeFs.ENOENT) {
              throw e;
            }
          }
        }
        try {
          NativeFs.unlinkat(dir, name, NativeFs.AT_REMOVEDIR);
          return true;
        } catch (NativeFs.Errno e) {
          if (e.errno == NativeFs.ENOENT) {
            return true;
          }
          if (e.errno != NativeFs.ENOTEMPTY || pass >= 3) {
            throw e;
          }
          // something was added meanwhile: read the directory again from the start
          NativeFs.close(fd);
          fd =
              NativeFs.openat(
                  dir, name, NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW, 0);
        }
      }
    } finally {
      NativeFs.close(fd);
    }
  }

  /** Renames {@code from} to {@code to}, as rename(2) in the sandbox would. */
  void rename(String from, String to) {
    boolean crossDevice =
        calls.call(
            from,
            root -> {
              Entry source = entry(root, from, true);
              try {
                if (!source.stat.isSymlink()) {
                  guard(root, from, source.stat);
                }
                boolean sourceIsDirectory = source.stat.isDirectory();
                Entry target;
                try {
                  target = entry(root, to, false);
                } catch (NativeFs.Errno e) {
                  throw RootfsCalls.translate(to, "cannot rename " + from + " to " + to + ": ", e);
                }
                try {
                  if (target.stat != null) {
                    if (target.stat.isDirectory()) {
                      guard(root, to, target.stat);
                      if (!sourceIsDirectory) {
                        throw new WorkspaceIsDirectoryException(
                            from, "cannot rename to " + to + ": is a directory");
                      }
                    } else if (sourceIsDirectory) {
                      throw new WorkspaceNotDirectoryException(
                          from, "cannot rename to " + to + ": not a directory");
                    }
                    if (!source.stat.isSymlink()
                        && !target.stat.isSymlink()
                        && source.stat.sameFile(target.stat)) {
                      return false; // rename(2) onto a hard link of the same file does nothing
                    }
                  }
                  try {
                    NativeFs.renameat(source.dir, source.name, target.dir, target.name);
                  } catch (NativeFs.Errno e) {
                    if (e.errno == NativeFs.EXDEV) {
                      return true;
                    }
                    if (e.errno == NativeFs.EEXIST) { // rename(2)'s other word for not empty
                      throw new WorkspaceDirectoryNotEmptyException(
                          from, "cannot rename to " + to + ": directory not empty");
                    }
                    throw RootfsCalls.translate(from, "cannot rename to " + to + ": ", e);
                  }
                  return false;
                } finally {
                  NativeFs.close(target.dir);
                }
              } finally {
                NativeFs.close(source.dir);
              }
            });
    if (crossDevice) {
      fallback.rename(from, to); // mv copies what rename(2) cannot move
    }
  }

  /**
   * An entry of a directory: its directory (resolved in the root, open O_PATH), its name there, and
   * its lstat (null if it does not exist, when {@code mustExist} is false). A path whose last
   * component is {@code ..} (or the root) is first replaced by the directory it names.
   */
  record Entry(int dir, byte[] name, NativeFs.Stat stat) {}

  Entry entry(int root, String path, boolean mustExist) throws NativeFs.Errno {
    String p = path;
    int slash = p.lastIndexOf('/');
    String name = p.substring(slash + 1);
    if (name.isEmpty() || name.equals("..") || name.equals(".")) {
      int fd =
          NativeFs.openInRoot(
              root, SandboxFiles.bytes(p), NativeFs.O_PATH | NativeFs.O_DIRECTORY, 0);
      try {
        p = physical(root, fd);
      } finally {
        NativeFs.close(fd);
      }
      if (p.equals("/")) {
        throw refused(path);
      }
      slash = p.lastIndexOf('/');
      name = p.substring(slash + 1);
    }
    String dirPath = slash <= 0 ? "/" : p.substring(0, slash);
    int dir = NativeFs.openInRoot(root, SandboxFiles.bytes(dirPath), SandboxFiles.dirFlags(), 0);
    try {
      byte[] n = SandboxFiles.bytes(name);
      NativeFs.Stat st;
      try {
        st = NativeFs.lstatAt(dir, n);
      } catch (NativeFs.Errno e) {
        if (e.errno == NativeFs.ENOENT && !mustExist) {
          return new Entry(dir, n, null);
        }
        throw e;
      }
      return new Entry(dir, n, st);
    } catch (NativeFs.Errno | RuntimeException e) {
      NativeFs.close(dir);
      throw e;
    }
  }

  /**
   * The path inside the sandbox of the open directory {@code dir}: the kernel's name for it, less
   * the root's. Used only to reopen the same directory (in the root again) from another task.
   */
  private String physical(int root, int dir) throws NativeFs.Errno {
    String rootPath = procPath(root);
    String dirPath = procPath(dir);
    if (dirPath.equals(rootPath)) {
      return "/";
    }
    if (!dirPath.startsWith(rootPath + "/")) {
      throw new NativeFs.Errno("locate directory", NativeFs.EXDEV);
    }
    return dirPath.substring(rootPath.length());
  }

  private static String procPath(int fd) throws NativeFs.Errno {
    byte[] target =
        NativeFs.readlinkat(NativeFs.AT_FDCWD, SandboxFiles.bytes("/proc/self/fd/" + fd));
    return new String(target, StandardCharsets.UTF_8);
  }

  /** Refuses {@code stat}'s file if it is the working directory or one of its ancestors. */
  private void guard(int root, String path, NativeFs.Stat stat) throws NativeFs.Errno {
    if (!stat.isDirectory()) {
      return;
    }
    String ancestor = workingDirectory;
    while (true) {
      try {
        int fd = NativeFs.openInRoot(root, SandboxFiles.bytes(ancestor), NativeFs.O_PATH, 0);
        try {
          if (NativeFs.fstat(fd).sameFile(stat)) {
            throw refused(path);
          }
        } finally {
          NativeFs.close(fd);
        }
      } catch (NativeFs.Errno e) {
        // gone or unreachable: nothing to protect there
      }
      if (ancestor.equals("/")) {
        return;
      }
      int slash = ancestor.lastIndexOf('/');
      ancestor = slash <= 0 ? "/" : ancestor.substring(0, slash);
    }
  }

  private static WorkspaceAccessDeniedException refused(String path) {
    return new WorkspaceAccessDeniedException(
        path,
        "refused: the working directory and its ancestors are never removed, moved or replaced");
  }
}
