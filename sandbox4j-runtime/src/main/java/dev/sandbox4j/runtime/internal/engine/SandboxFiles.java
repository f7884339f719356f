package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

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
 * mv} copies it); and a recursive remove deeper than {@value SandboxFileMoves#MAX_DEPTH}
 * directories ({@code rm -rf} finishes it). {@code realpath} is not offered here: {@link
 * dev.sandbox4j.workspace.Workspace#realpath} runs {@code realpath -m} as a command.
 *
 * <p>Limits: the sandbox's umask is taken to be {@code 022} (the OCI runtime's default for its
 * processes); a symlink whose text is not valid UTF-8 is followed by a write with U+FFFD in place
 * of the invalid bytes (still inside the root).
 */
public final class SandboxFiles implements SupportsFileSystem {
  /** The identity {@link SandboxUserThreads#probe} checks with (any non-root id does). */
  static final int UID = Image.UID_SHIFT + 1000;

  static final int GID = Image.UID_SHIFT + 1000;
  static final int UMASK = 022;

  private final RootfsCalls calls;
  private final SandboxFileWrites writes;
  private final SandboxFileMoves moves;
  private final SupportsFileSystem fallback;

  public SandboxFiles(
      Engine engine, String id, String workingDirectory, SupportsFileSystem fallback) {
    this.calls = new RootfsCalls(engine, id);
    this.writes = new SandboxFileWrites(calls);
    this.moves = new SandboxFileMoves(calls, workingDirectory, fallback);
    this.fallback = fallback;
  }

  private static volatile Boolean usable;

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
          u = NativeFs.AVAILABLE && SandboxUserThreads.probe();
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
        calls.call(
            path,
            root -> {
              int file = NativeFs.openInRoot(root, bytes(path), NativeFs.O_PATH, 0);
              try {
                NativeFs.Stat st = NativeFs.fstat(file);
                if (st.isDirectory()) {
                  throw new WorkspaceIsDirectoryException(path, "is a directory");
                }
                if (!st.isRegular()) {
                  throw RootfsCalls.notRegular(path);
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
    writes.write(path, content);
  }

  @Override
  public FileStat stat(String path) {
    if (!usable() || ownMount(path)) {
      return fallback.stat(path);
    }
    NativeFs.Stat st =
        calls.call(
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
    return calls.call(
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
    calls.call(
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
          SandboxFileMoves.Entry entry;
          try {
            entry = moves.entry(root, path, false);
          } catch (NativeFs.Errno e) {
            entry = null; // its parent is missing too
          }
          if (entry != null) {
            NativeFs.close(entry.dir());
            if (entry.stat() != null) {
              throw new WorkspaceFileAlreadyExistsException(
                  path, "already exists and is not a directory");
            }
          }
          SandboxFileWrites.mkdirs(root, path, path);
          return null;
        });
  }

  @Override
  public void remove(String path, boolean recursive) {
    if (!usable() || ownMount(path)) {
      fallback.remove(path, recursive);
      return;
    }
    moves.remove(path, recursive);
  }

  @Override
  public void rename(String from, String to) {
    if (!usable() || ownMount(from) || ownMount(to)) {
      fallback.rename(from, to);
      return;
    }
    moves.rename(from, to);
  }

  private static FileType type(NativeFs.Stat st) {
    return switch (st.type()) {
      case NativeFs.S_IFREG -> FileType.FILE;
      case NativeFs.S_IFDIR -> FileType.DIRECTORY;
      case NativeFs.S_IFLNK -> FileType.SYMLINK;
      default -> FileType.OTHER;
    };
  }

  static int dirFlags() {
    return NativeFs.O_PATH | NativeFs.O_DIRECTORY;
  }

  static byte[] bytes(String s) {
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
}
