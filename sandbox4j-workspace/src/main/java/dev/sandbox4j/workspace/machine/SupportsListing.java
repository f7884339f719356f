package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Optional;

/**
 * A provider that lists its machines and describes one. See {@link
 * dev.sandbox4j.workspace.machine}.
 */
public interface SupportsListing {

  /** Every machine of this provider (that the caller may see), sorted by id. */
  List<SandboxInfo> list();

  /**
   * What {@link #list()} says of {@code ref}'s machine; empty if it does not exist (destroyed,
   * unknown, or being created or destroyed right now).
   *
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  Optional<SandboxInfo> info(WorkspaceRef ref);
}
