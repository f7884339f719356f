package dev.sandbox4j.remote;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.Objects;

/**
 * A snapshot on a server (names are per organization).
 *
 * @param name its name, what {@code RemoteSandbox.builder().snapshot(name)} starts from
 * @param created when it was saved
 * @param source the sandbox it was saved from, or null if the server does not say
 * @param image the image of that sandbox
 * @param cpus the CPU quota new sandboxes from it get
 * @param memoryBytes their memory limit
 * @param pids their process-count limit
 * @param sizeBytes its size on the server's disk
 */
public record SnapshotInfo(
    String name,
    Instant created,
    WorkspaceRef source,
    String image,
    int cpus,
    long memoryBytes,
    int pids,
    long sizeBytes) {

  /** Checks the name. */
  public SnapshotInfo {
    Objects.requireNonNull(name, "name");
  }
}
