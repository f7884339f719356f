package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Path;

/**
 * A create refused because the file system of the engine's state directory has less free space than
 * the reserve the host keeps ({@link LocalSandbox.Builder#diskReserve}). Nothing was created. Free
 * space (destroy sandboxes, remove images, {@code sandbox4j gc}) and try again; retrying without
 * that fails the same way.
 */
public final class InsufficientDiskException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final long freeBytes;
  private final long reserveBytes;

  InsufficientDiskException(Path home, long freeBytes, long reserveBytes) {
    super(
        "cannot create a sandbox: the file system of "
            + home
            + " has "
            + freeBytes / (1L << 20)
            + " MiB free, below the reserve of "
            + reserveBytes / (1L << 20)
            + " MiB that the host keeps; free some space (destroy sandboxes, `sandbox4j gc`)");
    this.freeBytes = freeBytes;
    this.reserveBytes = reserveBytes;
  }

  /** The free space the create saw, in bytes. */
  public long freeBytes() {
    return freeBytes;
  }

  /** The reserve it must keep, in bytes. */
  public long reserveBytes() {
    return reserveBytes;
  }
}
