package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

/**
 * Runs one file operation of one sandbox: on a {@link SandboxUserThreads} thread as the sandbox's
 * user, with a descriptor of its root opened for the operation, and turns a failed system call into
 * the workspace exception that says what went wrong (or that the sandbox is gone).
 */
final class RootfsCalls {
  private final Engine engine;
  private final String id;
  private final String rootfs;

  /** The host uid and gid its file operations run as; -1 until read from its record. */
  private volatile long hostIds = -1;

  /**
   * The calls of sandbox {@code id} as its user ({@link SandboxIdentity}), read from its record.
   */
  RootfsCalls(Engine engine, String id) {
    this.engine = engine;
    this.id = id;
    this.rootfs = engine.home().resolve("sandboxes").resolve(id).resolve("rootfs").toString();
  }

  private static long pack(int uid, int gid) {
    return ((long) uid << 32) | (gid & 0xffffffffL);
  }

  /**
   * The host uid and gid of the sandbox's user: its container ids in its own block of host ids
   * ({@link IdBlocks}), never another sandbox's. Read once from its record (a sandbox's block and
   * identity never change). For a sandbox that runs as root (uid 0), that is the host id its root
   * maps to, which owns its root's files but has no capability over other users' files, unlike a
   * root process inside: the file operations get the permissions of an owner, no more.
   */
  private long hostIds() {
    long ids = hostIds;
    if (ids < 0) {
      SandboxRecord record = engine.record(id);
      ids =
          pack(
              record.hostBase() + record.identity().uid(),
              record.hostBase() + record.identity().gid());
      hostIds = ids;
    }
    return ids;
  }

  @FunctionalInterface
  interface Task<T> {
    T run(int root) throws NativeFs.Errno;
  }

  /**
   * Runs {@code task} on a pool thread as the sandbox user, with the root's descriptor. The root is
   * opened anew each time (a held descriptor would keep the mount busy when the sandbox is
   * destroyed) and must be the overlay mount: a sandbox being destroyed is unavailable.
   */
  <T> T call(String path, Task<T> task) {
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
      long ids = hostIds();
      int uid = (int) (ids >>> 32);
      int gid = (int) ids;
      Future<T> future =
          SandboxUserThreads.EXECUTOR.submit(
              () -> SandboxUserThreads.asSandboxUser(uid, gid, () -> task.run(root)));
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

  /**
   * Makes directory {@code path} in the sandbox's root unless it is one, as the engine (host root)
   * on this thread, for the engine's own setup of a new sandbox (never on behalf of its user, whose
   * permissions a parent owned by someone else would refuse): missing parents become host ids
   * {@code parentUid}:{@code parentGid}'s (the sandbox's root's), the directory itself {@code
   * uid}:{@code gid}'s; with {@code always}, also if it exists already. Each name is made in a
   * descriptor of its parent resolved inside the root ({@link NativeFs#openInRoot}) and changed
   * through a descriptor of its own, so no link leads a change out of the root. Returns whether it
   * existed.
   */
  boolean makeDirectoryAsHost(
      String path, int parentUid, int parentGid, int uid, int gid, boolean always) {
    try {
      int root = NativeFs.openHostDirectory(rootfs);
      try {
        boolean existed = makeDirectories(root, path, parentUid, parentGid);
        if (!existed || always) {
          chown(root, path, uid, gid);
        }
        return existed;
      } finally {
        NativeFs.close(root);
      }
    } catch (NativeFs.Errno e) {
      throw translate(path, "", e);
    } catch (java.io.IOException e) {
      throw new WorkspaceFileException(path, "cannot make it: " + e.getMessage(), e);
    }
  }

  /** Makes {@code dir} and its missing parents, each {@code uid}:{@code gid}'s; whether it was. */
  private static boolean makeDirectories(int root, String dir, int uid, int gid)
      throws NativeFs.Errno, java.io.IOException {
    if (SandboxFileWrites.isDirectory(root, dir)) {
      return true;
    }
    if (dir.equals("/")) {
      throw new NativeFs.Errno("open /", NativeFs.ENOTDIR);
    }
    int slash = dir.lastIndexOf('/');
    String parent = slash <= 0 ? "/" : dir.substring(0, slash);
    makeDirectories(root, parent, uid, gid);
    int parentFd =
        NativeFs.openInRoot(root, SandboxFiles.bytes(parent), SandboxFiles.dirFlags(), 0);
    try {
      NativeFs.mkdirat(parentFd, SandboxFiles.bytes(dir.substring(slash + 1)), 0755);
    } catch (NativeFs.Errno e) {
      if (e.errno != NativeFs.EEXIST || !SandboxFileWrites.isDirectory(root, dir)) {
        throw e;
      }
      return false; // made meanwhile
    } finally {
      NativeFs.close(parentFd);
    }
    chown(root, dir, uid, gid);
    int made =
        NativeFs.openInRoot(
            root, SandboxFiles.bytes(dir), NativeFs.O_RDONLY | NativeFs.O_DIRECTORY, 0);
    try {
      NativeFs.fchmod(made, 0755); // as mkdir -p in the sandbox makes it, whatever our umask is
    } finally {
      NativeFs.close(made);
    }
    return false;
  }

  private static void chown(int root, String path, int uid, int gid)
      throws NativeFs.Errno, java.io.IOException {
    int fd = NativeFs.openInRoot(root, SandboxFiles.bytes(path), NativeFs.O_PATH, 0);
    try {
      // the descriptor's own /proc link: the file found inside the root, whatever links say now
      java.nio.file.Path self = java.nio.file.Path.of("/proc/self/fd/" + fd);
      java.nio.file.Files.setAttribute(self, "unix:uid", uid);
      java.nio.file.Files.setAttribute(self, "unix:gid", gid);
    } finally {
      NativeFs.close(fd);
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

  static WorkspaceFileException notRegular(String path) {
    return new WorkspaceFileException(
        path, "not a regular file (a FIFO, socket or device): refused");
  }
}
