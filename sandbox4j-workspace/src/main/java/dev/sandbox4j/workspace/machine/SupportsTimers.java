package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.Optional;

/**
 * A provider whose machines carry timers (suspend when idle, a lifetime, destroy when idle or at a
 * point in time) that it enforces by itself. See {@link dev.sandbox4j.workspace.machine}.
 *
 * <p>Read-only: timers are set when a machine is created, with the provider's builder, and neither
 * engine changes them afterwards (the local engine writes them once while it creates a machine and
 * counts the lifetime's end from that moment; its supervisor enforces what was written).
 */
public interface SupportsTimers {

  /**
   * The timers of {@code ref}'s machine, as it was created with them; empty for a machine that has
   * none (the local engine: made before timers existed).
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist (a
   *     timer may have ended it: the message then says which)
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  Optional<SandboxTimers> timers(WorkspaceRef ref);
}
