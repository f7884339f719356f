package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;

/**
 * A provider that saves a machine's files as a named snapshot that new machines start from (how a
 * new machine is told to start from one belongs to the provider's builder). See {@link
 * dev.sandbox4j.workspace.machine}.
 */
public interface SupportsSnapshots {

  /**
   * Saves {@code ref}'s files as snapshot {@code name}, replacing a snapshot of that name (machines
   * made from it keep theirs). The snapshot is usable only once complete.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider, or the provider does
   *     not accept the name
   */
  SnapshotInfo snapshot(WorkspaceRef ref, String name);

  /** Every complete snapshot (that the caller may see), sorted by name. */
  List<SnapshotInfo> snapshots();

  /**
   * Removes snapshot {@code name}. Machines made from it keep their files.
   *
   * @return whether there was such a snapshot
   * @throws IllegalArgumentException if the provider does not accept the name
   */
  boolean removeSnapshot(String name);
}
