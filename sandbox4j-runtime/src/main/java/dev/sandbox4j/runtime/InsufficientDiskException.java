package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Path;

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

  public InsufficientDiskException(Path home, long freeBytes, long reserveBytes) {
    this(
        "cannot create a sandbox: the file system of "
            + home
            + " has "
            + freeBytes / MIB
            + " MiB free, below the reserve of "
            + reserveBytes / MIB
            + " MiB that the host keeps; free some space (destroy sandboxes, `sandbox4j gc`)",
        freeBytes,
        reserveBytes);
  }

  private InsufficientDiskException(String message, long freeBytes, long reserveBytes) {
    super(message);
    this.freeBytes = freeBytes;
    this.reserveBytes = reserveBytes;
  }

  private static final long MIB = 1L << 20;

  /** The new disk and what the other disks may still take do not fit the overcommitted space. */
  public static InsufficientDiskException overcommitted(
      Path home,
      long freeBytes,
      long reserveBytes,
      double overcommit,
      long committed,
      int disks,
      long asked) {
    return new InsufficientDiskException(
        "cannot create a sandbox: its disk (up to "
            + asked / MIB
            + " MiB) and what the "
            + disks
            + " disks of "
            + home
            + " may still write ("
            + committed / MIB
            + " MiB) exceed "
            + overcommit
            + " times the "
            + Math.max(0, freeBytes - reserveBytes) / MIB
            + " MiB free above the reserve of "
            + reserveBytes / MIB
            + " MiB (diskOvercommit); destroy sandboxes, ask for a smaller disk, or raise"
            + " diskOvercommit",
        freeBytes,
        reserveBytes);
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
