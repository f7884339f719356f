package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;

/**
 * A snapshot: an image saved from a sandbox by {@link LocalSandbox#snapshot}, which new sandboxes
 * start from ({@link LocalSandbox.Builder#snapshot}) with the size it was saved with.
 *
 * @param name its name (an image name)
 * @param created when it was saved
 * @param source the sandbox it was saved from (which may be gone since)
 * @param image the image that sandbox was created from
 * @param cpus the CPU quota of sandboxes made from it
 * @param memoryBytes their memory limit
 * @param pids their limit on processes
 * @param sizeBytes the size of its files, image included
 * @param diskBytes the byte quota of the writable layer of sandboxes made from it unless their
 *     builder sets one ({@link LocalSandbox.Builder#disk}): its source's, or the default for a
 *     snapshot saved before sandboxes had disks
 * @param diskInodes the inode quota of their writable layer, likewise
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

  static SnapshotInfo of(Image image, ImageStore.Snapshot s) {
    return new SnapshotInfo(
        image.name(),
        image.created(),
        new WorkspaceRef(LocalSandbox.NAME, s.sandbox()),
        s.image(),
        s.cpus(),
        s.memoryBytes(),
        s.pids(),
        image.sizeBytes(),
        s.disk().bytes(),
        s.disk().inodes());
  }
}
