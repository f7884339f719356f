package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.runtime.internal.linux.ThreadCredentials;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The file system of one local sandbox, done from the host with system calls instead of one {@code
 * crun exec} per operation.
 *
 * <p><b>Confinement.</b> Every path is resolved by {@code openat2(2)} relative to the sandbox's
 * root ({@code sandboxes/<id>/rootfs}, its overlay mount as the host sees it) with {@code
 * RESOLVE_IN_ROOT}: absolute symlinks and {@code ..} are resolved as if that directory were {@code
 * /}, atomically in the kernel, so code in the sandbox that swaps symlinks at any moment still
 * cannot make a path leave it. {@code RESOLVE_NO_MAGICLINKS} refuses {@code /proc/<pid>/root}-style
 * links and {@code RESOLVE_NO_XDEV} any other mount. What acts on a single name (remove, rename,
 * create) does so with the {@code *at} calls on a directory descriptor that was resolved that way,
 * and recursion opens each child with {@code O_NOFOLLOW}. A file is only ever opened for reading
 * after its descriptor ({@code O_PATH}, which opens nothing) showed a regular file: a FIFO, socket
 * or device is refused without being opened.
 *
 * <p><b>Permissions.</b> The system calls run on a small pool of platform threads shared by every
 * sandbox of the JVM. For each operation the thread takes the file system identity of the sandbox
 * user (container {@code 1000}: host uid and gid {@code hostBase + 1000} in the sandbox's own block
 * of host ids, {@link IdBlocks}, that group only), with the per-thread {@code setfsuid}, {@code
 * setfsgid} and raw {@code setgroups} system calls, and gives it back before the operation returns.
 * A non-zero fsuid clears the file system capabilities ({@code CAP_DAC_OVERRIDE} and the like) from
 * the thread's effective set, so the kernel checks permissions exactly as for the sandbox's user,
 * and files it creates belong to that user. The identity is given back before anything else runs on
 * the thread, because a thread created from it (a virtual thread scheduler's carrier, say) would
 * inherit it. A probe checks once that the kernel does drop the capabilities; if it does not, or
 * native access is not available, every operation goes through {@code fallback} (commands in the
 * sandbox).
 *
 * <p><b>What still goes through {@code fallback}:</b> paths under {@code /proc}, {@code /sys} and
 * {@code /dev}, which in the sandbox are its own mounts (the host sees only the empty directories
 * below them); a rename the overlay refuses with EXDEV (a directory of the image's layers: {@code
 * mv} copies it); and a recursive remove deeper than {@value #MAX_DEPTH} directories ({@code rm
 * -rf} finishes it). {@code realpath} is not offered here: {@link
 * dev.sandbox4j.workspace.Workspace#realpath} runs {@code realpath -m} as a command.
 *
 * <p>Limits: the sandbox's umask is taken to be {@code 022} (the OCI runtime's default for its
 * processes); a symlink whose text is not valid UTF-8 is followed by a write with U+FFFD in place
 * of the invalid bytes (still inside the root).
 */
public final class SandboxFiles implements SupportsFileSystem {
  /** The identity {@link Pool#probe} checks with (any non-root id does). */
  static final int UID = Image.UID_SHIFT + 1000;

  static final int GID = Image.UID_SHIFT + 1000;
  private static final int UMASK = 022;
  private static final int MAX_DEPTH = 256;
  private static final int MAX_SYMLINKS = 40;
  private static final int THREADS = 4;
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final System.Logger LOG = System.getLogger(SandboxFiles.class.getName());

  private final Engine engine;
  private final String id;
  private final String rootfs;
  private final String workingDirectory;
  private final SupportsFileSystem fallback;

  public SandboxFiles(
      Engine engine, String id, String workingDirectory, SupportsFileSystem fallback) {
    this.engine = engine;
    this.id = id;
    this.rootfs = engine.home().resolve("sandboxes").resolve(id).resolve("rootfs").toString();
    this.workingDirectory = workingDirectory;
    this.fallback = fallback;
  }

  private static volatile Boolean usable;

  /** The host uid (= gid) of the sandbox's user; 0 until read from its record. */
  private volatile int userId;

  /**
   * The host uid and gid of container user 1000 in this sandbox: in its own block of host ids
   * ({@link IdBlocks}), never another sandbox's. Read once from its record (a sandbox's block never
   * changes).
   */
  private int userId() {
    int u = userId;
    if (u == 0) {
      u = engine.record(id).hostBase() + 1000;
      userId = u;
    }
    return u;
  }

  /**
   * Whether this JVM can use the native path: checked once, by a probe (outside any class
   * initializer, since the probe's code runs on a pool thread).
   */
  public static boolean usable() {
    Boolean u = usable;
    if (u == null) {
      synchronized (SandboxFiles.class) {
        u = usable;
        if (u == null) {
          u = NativeFs.AVAILABLE && Pool.probe();
          usable = u;
        }
      }
    }
    return u;
  }

  // ---- the operations -------------------------------------------------------------------------

  @Override
  public InputStream openRead(String path) {
    if (!usable() || ownMount(path)) {
      return fallback.openRead(path);
    }
    int fd =
        call(
            path,
            root -> {
              int file = NativeFs.openInRoot(root, bytes(path), NativeFs.O_PATH, 0);
              try {
                NativeFs.Stat st = NativeFs.fstat(file);
                if (st.isDirectory()) {
                  throw new WorkspaceIsDirectoryException(path, "is a directory");
                }
                if (!st.isRegular()) {
                  throw notRegular(path);
                }
                // Opening the O_PATH descriptor again for reading checks read permission, as the
                // sandbox user; the type cannot change: it is the same inode.
                return NativeFs.openat(
                    NativeFs.AT_FDCWD, bytes("/proc/self/fd/" + file), NativeFs.O_RDONLY, 0);
              } finally {
                NativeFs.close(file);
              }
            });
    // The JDK's stream over the same open file, made on this thread, not on a pool thread (no JDK
    // machinery, a cleaner thread say, ever starts while a pool thread is the sandbox user).
    try {
      return new FileInputStream("/proc/self/fd/" + fd);
    } catch (IOException e) {
      throw new WorkspaceFileException(path, "cannot open: " + e.getMessage(), e);
    } finally {
      NativeFs.close(fd);
    }
  }

  @Override
  public void write(String path, InputStream content) {
    if (!usable() || ownMount(path)) {
      fallback.write(path, content);
      return;
    }
    String temp = ".sandbox4j-write." + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    byte[] tempName = bytes(temp);
    Target target =
        call(
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
      call(
          path,
          root -> {
            // Only now: a mode without u+w would have stopped the writing, and writing may clear
            // setuid.
            NativeFs.fchmod(target.temp, target.mode);
            NativeFs.renameat(target.dir, tempName, target.dir, bytes(target.name));
            return null;
          });
      renamed = true;
    } finally {
      try {
        if (!renamed) {
          call(
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
  private Target prepareWrite(int root, String path) throws NativeFs.Errno {
    String current = path;
    for (int hops = 0; hops <= MAX_SYMLINKS; hops++) {
      int slash = current.lastIndexOf('/');
      String dirPath = slash <= 0 ? "/" : current.substring(0, slash);
      String name = current.substring(slash + 1);
      if (name.isEmpty() || name.equals(".") || name.equals("..")) {
        // names a directory if it resolves at all
        int fd = NativeFs.openInRoot(root, bytes(current), NativeFs.O_PATH, 0);
        NativeFs.close(fd);
        throw new WorkspaceIsDirectoryException(path, "is a directory");
      }
      int dir;
      try {
        dir = NativeFs.openInRoot(root, bytes(dirPath), dirFlags(), 0);
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.ENOENT) {
          throw e;
        }
        mkdirs(root, path, dirPath);
        dir = NativeFs.openInRoot(root, bytes(dirPath), dirFlags(), 0);
      }
      try {
        NativeFs.Stat st;
        try {
          st = NativeFs.lstatAt(dir, bytes(name));
        } catch (NativeFs.Errno e) {
          if (e.errno == NativeFs.ENOENT) {
            int kept = dir;
            dir = -1; // handed to the target
            return new Target(kept, name, 0666 & ~UMASK, -1);
          }
          throw e;
        }
        if (st.isSymlink()) {
          String link = new String(NativeFs.readlinkat(dir, bytes(name)), StandardCharsets.UTF_8);
          current = link.startsWith("/") ? link : (dirPath.equals("/") ? "" : dirPath) + "/" + link;
          continue;
        }
        if (st.isDirectory()) {
          throw new WorkspaceIsDirectoryException(path, "is a directory");
        }
        if (!st.isRegular()) {
          throw notRegular(path);
        }
        int fd = NativeFs.openat(dir, bytes(name), NativeFs.O_PATH | NativeFs.O_NOFOLLOW, 0);
        try {
          NativeFs.Stat again = NativeFs.fstat(fd);
          if (!again.isRegular()) {
            throw notRegular(path);
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
    byte[] target = NativeFs.readlinkat(NativeFs.AT_FDCWD, bytes("/proc/self/fd/" + fd));
    return new String(target, StandardCharsets.UTF_8);
  }

  /** mkdir -p of {@code dirPath}, where a non-directory in the way is not-a-directory. */
  private void mkdirs(int root, String path, String dirPath) throws NativeFs.Errno {
    for (int attempt = 0; attempt < 3; attempt++) {
      try {
        NativeFs.close(NativeFs.openInRoot(root, bytes(dirPath), dirFlags(), 0));
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
      int dir = NativeFs.openInRoot(root, bytes(parent), dirFlags(), 0);
      try {
        NativeFs.mkdirat(dir, bytes(name), 0777 & ~UMASK);
        fixDirectoryMode(dir, bytes(name));
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.EEXIST) {
          throw e;
        }
        // a dangling symlink or a file in the way: mkdir -p's "File exists"
        try {
          NativeFs.close(NativeFs.openInRoot(root, bytes(dirPath), dirFlags(), 0));
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
    if ((Pool.PROCESS_UMASK & ~UMASK) == 0) {
      return;
    }
    int fd =
        NativeFs.openat(
            dir, name, NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW, 0);
    try {
      NativeFs.fchmod(fd, 0777 & ~UMASK);
    } finally {
      NativeFs.close(fd);
    }
  }

  @Override
  public FileStat stat(String path) {
    if (!usable() || ownMount(path)) {
      return fallback.stat(path);
    }
    NativeFs.Stat st =
        call(
            path,
            root -> {
              int fd = NativeFs.openInRoot(root, bytes(path), NativeFs.O_PATH, 0);
              try {
                return NativeFs.fstat(fd);
              } finally {
                NativeFs.close(fd);
              }
            });
    return new FileStat(path, type(st), Math.max(0, st.size()), st.mode() & 07777, st.modified());
  }

  @Override
  public boolean exists(String path) {
    if (!usable() || ownMount(path)) {
      return fallback.exists(path);
    }
    try {
      stat(path);
      return true;
    } catch (WorkspaceNoSuchFileException
        | WorkspaceNotDirectoryException
        | WorkspaceAccessDeniedException e) {
      return false;
    } catch (WorkspaceUnavailableException e) {
      throw e;
    } catch (WorkspaceFileException e) {
      return false; // a symlink loop, as test -e
    }
  }

  @Override
  public List<DirectoryEntry> list(String path) {
    if (!usable() || ownMount(path)) {
      return fallback.list(path);
    }
    return call(
        path,
        root -> {
          int fd =
              NativeFs.openInRoot(root, bytes(path), NativeFs.O_RDONLY | NativeFs.O_DIRECTORY, 0);
          try {
            List<DirectoryEntry> entries = new ArrayList<>();
            for (byte[] name : NativeFs.readDirectory(fd)) {
              NativeFs.Stat st;
              try {
                st = NativeFs.lstatAt(fd, name);
              } catch (NativeFs.Errno e) {
                if (e.errno == NativeFs.ENOENT) {
                  continue; // removed meanwhile
                }
                throw e;
              }
              entries.add(
                  new DirectoryEntry(
                      new String(name, StandardCharsets.UTF_8), type(st), Math.max(0, st.size())));
            }
            entries.sort(Comparator.comparing(DirectoryEntry::name));
            return entries;
          } finally {
            NativeFs.close(fd);
          }
        });
  }

  @Override
  public void createDirectories(String path) {
    if (!usable() || ownMount(path)) {
      fallback.createDirectories(path);
      return;
    }
    call(
        path,
        root -> {
          try {
            int fd = NativeFs.openInRoot(root, bytes(path), NativeFs.O_PATH, 0);
            try {
              if (NativeFs.fstat(fd).isDirectory()) {
                return null;
              }
            } finally {
              NativeFs.close(fd);
            }
            throw new WorkspaceFileAlreadyExistsException(
                path, "already exists and is not a directory");
          } catch (NativeFs.Errno e) {
            if (e.errno != NativeFs.ENOENT) {
              throw e;
            }
          }
          // a dangling symlink at the path is in the way too
          Entry entry;
          try {
            entry = entry(root, path, false);
          } catch (NativeFs.Errno e) {
            entry = null; // its parent is missing too
          }
          if (entry != null) {
            NativeFs.close(entry.dir);
            if (entry.stat != null) {
              throw new WorkspaceFileAlreadyExistsException(
                  path, "already exists and is not a directory");
            }
          }
          mkdirs(root, path, path);
          return null;
        });
  }

  @Override
  public void remove(String path, boolean recursive) {
    if (!usable() || ownMount(path)) {
      fallback.remove(path, recursive);
      return;
    }
    boolean tooDeep =
        call(
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

  @Override
  public void rename(String from, String to) {
    if (!usable() || ownMount(from) || ownMount(to)) {
      fallback.rename(from, to);
      return;
    }
    boolean crossDevice =
        call(
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
                  throw translate(to, "cannot rename " + from + " to " + to + ": ", e);
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
                    throw translate(from, "cannot rename to " + to + ": ", e);
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
  private record Entry(int dir, byte[] name, NativeFs.Stat stat) {}

  private Entry entry(int root, String path, boolean mustExist) throws NativeFs.Errno {
    String p = path;
    int slash = p.lastIndexOf('/');
    String name = p.substring(slash + 1);
    if (name.isEmpty() || name.equals("..") || name.equals(".")) {
      int fd = NativeFs.openInRoot(root, bytes(p), NativeFs.O_PATH | NativeFs.O_DIRECTORY, 0);
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
    int dir = NativeFs.openInRoot(root, bytes(dirPath), dirFlags(), 0);
    try {
      byte[] n = bytes(name);
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

  /** Refuses {@code stat}'s file if it is the working directory or one of its ancestors. */
  private void guard(int root, String path, NativeFs.Stat stat) throws NativeFs.Errno {
    if (!stat.isDirectory()) {
      return;
    }
    String ancestor = workingDirectory;
    while (true) {
      try {
        int fd = NativeFs.openInRoot(root, bytes(ancestor), NativeFs.O_PATH, 0);
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

  // ---- running a task -------------------------------------------------------------------------

  @FunctionalInterface
  private interface Task<T> {
    T run(int root) throws NativeFs.Errno;
  }

  /**
   * Runs {@code task} on a pool thread as the sandbox user, with the root's descriptor. The root is
   * opened anew each time (a held descriptor would keep the mount busy when the sandbox is
   * destroyed) and must be the overlay mount: a sandbox being destroyed is unavailable.
   */
  private <T> T call(String path, Task<T> task) {
    int root;
    try {
      root = NativeFs.openHostDirectory(rootfs);
      if (!NativeFs.isOverlay(root)) {
        NativeFs.close(root);
        throw unavailable(null);
      }
    } catch (NativeFs.Errno e) {
      throw unavailable(e);
    }
    try {
      int user = userId();
      Future<T> future =
          Pool.EXECUTOR.submit(() -> Pool.asSandboxUser(user, user, () -> task.run(root)));
      // Waits for the task even if interrupted: the root's descriptor is closed only after it,
      // since a number closed under a running task could be reused for a host directory. Tasks
      // are short (nothing they do waits on the sandbox).
      boolean interrupted = false;
      try {
        while (true) {
          try {
            return future.get();
          } catch (InterruptedException e) {
            interrupted = true;
          }
        }
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof NativeFs.Errno errno) {
          if (!engine.isAlive(id)) {
            throw unavailable(errno);
          }
          throw translate(path, "", errno);
        }
        if (cause instanceof RuntimeException r) {
          throw r;
        }
        if (cause instanceof Error err) {
          throw err;
        }
        throw new WorkspaceFileException(path, "failed: " + cause, cause);
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    } finally {
      NativeFs.close(root);
    }
  }

  private WorkspaceUnavailableException unavailable(Throwable cause) {
    return new WorkspaceUnavailableException(
        "sandbox local:" + id + " is unavailable: its root file system is gone", cause);
  }

  static WorkspaceFileException translate(String path, String prefix, NativeFs.Errno e) {
    return switch (e.errno) {
      case NativeFs.ENOENT ->
          new WorkspaceNoSuchFileException(path, prefix + "no such file or directory");
      case NativeFs.ENOTDIR -> new WorkspaceNotDirectoryException(path, prefix + "not a directory");
      case NativeFs.EISDIR -> new WorkspaceIsDirectoryException(path, prefix + "is a directory");
      case NativeFs.EEXIST ->
          new WorkspaceFileAlreadyExistsException(path, prefix + "already exists");
      case NativeFs.EACCES, NativeFs.EPERM ->
          new WorkspaceAccessDeniedException(path, prefix + "permission denied");
      case NativeFs.ENOTEMPTY ->
          new WorkspaceDirectoryNotEmptyException(path, prefix + "directory not empty");
      case NativeFs.ELOOP ->
          new WorkspaceFileException(path, prefix + "too many levels of symbolic links");
      case NativeFs.EXDEV ->
          new WorkspaceFileException(path, prefix + "crosses a mount point: refused");
      default -> new WorkspaceFileException(path, prefix + e.getMessage());
    };
  }

  private static WorkspaceFileException notRegular(String path) {
    return new WorkspaceFileException(
        path, "not a regular file (a FIFO, socket or device): refused");
  }

  private static FileType type(NativeFs.Stat st) {
    return switch (st.type()) {
      case NativeFs.S_IFREG -> FileType.FILE;
      case NativeFs.S_IFDIR -> FileType.DIRECTORY;
      case NativeFs.S_IFLNK -> FileType.SYMLINK;
      default -> FileType.OTHER;
    };
  }

  private static int dirFlags() {
    return NativeFs.O_PATH | NativeFs.O_DIRECTORY;
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** Whether {@code path} is under one of the sandbox's own mounts, which the host does not see. */
  static boolean ownMount(String path) {
    for (String mount : List.of("/proc", "/sys", "/dev")) {
      if (path.equals(mount) || path.startsWith(mount + "/")) {
        return true;
      }
    }
    return false;
  }

  // ---- the pool -------------------------------------------------------------------------------

  /** The threads that take the sandbox user's identity, and the probe that they really do. */
  private static final class Pool {
    static final ThreadPoolExecutor EXECUTOR;
    static final int PROCESS_UMASK = processUmask();

    static {
      AtomicInteger n = new AtomicInteger();
      EXECUTOR =
          new ThreadPoolExecutor(
              THREADS,
              THREADS,
              30,
              TimeUnit.SECONDS,
              new LinkedBlockingQueue<>(),
              r ->
                  Thread.ofPlatform()
                      .name("sandbox4j-files-" + n.incrementAndGet())
                      .daemon()
                      .unstarted(r));
      EXECUTOR.allowCoreThreadTimeOut(true);
    }

    @FunctionalInterface
    interface Body<T> {
      T run() throws NativeFs.Errno;
    }

    /**
     * Runs {@code body} with the sandbox user's file system identity, on this (pool) thread, and
     * restores the thread's own identity afterwards, whatever happens.
     */
    static <T> T asSandboxUser(int uid, int gid, Body<T> body) throws NativeFs.Errno {
      ThreadCredentials.Identity saved = ThreadCredentials.assume(uid, gid);
      try {
        return body.run();
      } finally {
        ThreadCredentials.restore(saved);
      }
    }

    /**
     * Checks that the kernel gives a pool thread exactly the sandbox user's rights: a root-only
     * directory is refused, and a file created in an open one belongs to the sandbox user.
     */
    static boolean probe() {
      Path dir = null;
      try {
        dir = Files.createTempDirectory("sandbox4j-files-probe-");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path closed = Files.createDirectory(dir.resolve("closed"));
        Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
        Path open = Files.createDirectory(dir.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path rootFile = Files.writeString(open.resolve("root-owned"), "x");
        Future<String> verdict =
            EXECUTOR.submit(
                () ->
                    asSandboxUser(
                        UID,
                        GID,
                        () -> {
                          try {
                            NativeFs.close(
                                NativeFs.openat(
                                    NativeFs.AT_FDCWD,
                                    bytes(closed.toString()),
                                    NativeFs.O_RDONLY | NativeFs.O_DIRECTORY,
                                    0));
                            return "a root-only directory was readable";
                          } catch (NativeFs.Errno e) {
                            if (e.errno != NativeFs.EACCES) {
                              return "unexpected " + e.getMessage();
                            }
                          }
                          try {
                            int fd =
                                NativeFs.openat(
                                    NativeFs.AT_FDCWD, bytes(rootFile.toString()), 0, 0);
                            try {
                              NativeFs.fchmod(fd, 0600);
                              return "a root-owned file's mode could be changed";
                            } catch (NativeFs.Errno e) {
                              if (e.errno != NativeFs.EPERM) {
                                return "unexpected " + e.getMessage();
                              }
                            } finally {
                              NativeFs.close(fd);
                            }
                          } catch (NativeFs.Errno e) {
                            return "unexpected " + e.getMessage();
                          }
                          int fd =
                              NativeFs.openat(
                                  NativeFs.AT_FDCWD,
                                  bytes(open.resolve("probe").toString()),
                                  NativeFs.O_WRONLY | NativeFs.O_CREAT | NativeFs.O_EXCL,
                                  0600);
                          try {
                            NativeFs.Stat st = NativeFs.fstat(fd);
                            if (st.uid() != UID || st.gid() != GID) {
                              return "a new file belongs to " + st.uid() + ":" + st.gid();
                            }
                          } finally {
                            NativeFs.close(fd);
                          }
                          return null;
                        }));
        String problem = verdict.get(30, TimeUnit.SECONDS);
        if (problem != null) {
          LOG.log(
              System.Logger.Level.INFO,
              "Sandbox files go through commands: the identity of the sandbox user is not enforced ({0})",
              problem);
          return false;
        }
        return true;
      } catch (Exception | Error e) {
        LOG.log(
            System.Logger.Level.INFO,
            "Sandbox files go through commands: cannot take the identity of the sandbox user ({0})",
            e.toString());
        return false;
      } finally {
        if (dir != null) {
          try {
            Trees.delete(dir);
          } catch (IOException ignored) {
            // a leftover in the temp directory
          }
        }
      }
    }

    private static int processUmask() {
      try {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
          if (line.startsWith("Umask:")) {
            return Integer.parseInt(line.substring(6).strip(), 8);
          }
        }
      } catch (IOException | RuntimeException e) {
        // assume the worst: fix every new directory's mode
      }
      return 0777;
    }
  }
}
