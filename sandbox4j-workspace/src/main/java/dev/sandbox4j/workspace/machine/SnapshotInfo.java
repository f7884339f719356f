package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.Objects;

/**
 * A snapshot: a machine's files saved by {@link SupportsSnapshots#snapshot}, which new machines
 * start from with the size it was saved with.
 *
 * @param name its name, unique per provider (per organization on a server)
 * @param created when it was saved, or null if the provider does not say
 * @param source the machine it was saved from (which may be gone since), or null if the provider
 *     does not say
 * @param image the image that machine was created from, or null if the provider does not say
 * @param cpus the CPU quota of machines made from it
 * @param memoryBytes their memory limit
 * @param pids their limit on processes
 * @param sizeBytes the size of its files, image included
 * @param diskBytes the byte quota of the writable layer of machines made from it unless they set
 *     one; 0 if the provider does not say
 * @param diskInodes the inode quota of their writable layer, likewise; 0 if the provider does not
 *     say
 */
public record SnapshotInfo(
    String name,
    Instant created,
    WorkspaceRef source,
    String image,
    int cpus,
    long memoryBytes,
    int pids,
    long sizeBytes,
    long diskBytes,
    long diskInodes) {

  /** Checks the name. */
  public SnapshotInfo {
    Objects.requireNonNull(name, "name");
  }
}
