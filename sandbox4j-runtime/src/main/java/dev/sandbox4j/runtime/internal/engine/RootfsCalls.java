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

  /** The host uid (= gid) of the sandbox's user; 0 until read from its record. */
  private volatile int userId;

  RootfsCalls(Engine engine, String id) {
    this.engine = engine;
    this.id = id;
    this.rootfs = engine.home().resolve("sandboxes").resolve(id).resolve("rootfs").toString();
  }

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
      int user = userId();
      Future<T> future =
          SandboxUserThreads.EXECUTOR.submit(
              () -> SandboxUserThreads.asSandboxUser(user, user, () -> task.run(root)));
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

  static WorkspaceFileException notRegular(String path) {
    return new WorkspaceFileException(
        path, "not a regular file (a FIFO, socket or device): refused");
  }
}
