package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;

/**
 * A create refused because the file system of the engine's state directory has less free space than
 * the reserve the host keeps ({@link LocalSandbox.Builder#diskReserve}), or too little above it for
 * the new sandbox's disk and what the other sandboxes' disks may still write ({@link
 * LocalSandbox.Builder#diskOvercommit}). Nothing was created. Free space (destroy sandboxes, remove
 * images, {@code sandbox4j gc}) and try again; retrying without that fails the same way.
 */
public final class InsufficientDiskException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  private final long freeBytes;
  private final long reserveBytes;

  /**
   * @param message what was refused and what to do about it
   * @param freeBytes the free space the create saw
   * @param reserveBytes the reserve it must keep
   */
  public InsufficientDiskException(String message, long freeBytes, long reserveBytes) {
    super(message);
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
