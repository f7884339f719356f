package dev.sandbox4j.workspace.machine;

import java.time.Duration;
import java.time.Instant;

/**
 * The timers of a machine, as it was created with them. Where the provider enforces them (the local
 * engine's supervisor, a server), they hold also when no JVM of the user runs.
 *
 * @param autoSuspendTimeout idle time after which the machine is suspended; zero: never (null
 *     becomes zero)
 * @param sandboxTimeout its total lifetime from creation, after which it is destroyed; zero: no
 *     limit (null becomes zero)
 * @param idleTimeout idle time after which it is destroyed; zero: never (null becomes zero)
 * @param deleteAfter when it is destroyed, or null for no such point in time
 * @param ends when a timer destroys it at the latest: creation plus {@code sandboxTimeout}, or
 *     {@code deleteAfter} if that is earlier; null if the provider does not say (the local engine
 *     always does)
 */
public record SandboxTimers(
    Duration autoSuspendTimeout,
    Duration sandboxTimeout,
    Duration idleTimeout,
    Instant deleteAfter,
    Instant ends) {

  /** Turns absent durations into zero (off) and refuses negative ones. */
  public SandboxTimers {
    autoSuspendTimeout = autoSuspendTimeout == null ? Duration.ZERO : autoSuspendTimeout;
    sandboxTimeout = sandboxTimeout == null ? Duration.ZERO : sandboxTimeout;
    idleTimeout = idleTimeout == null ? Duration.ZERO : idleTimeout;
    if (autoSuspendTimeout.isNegative()
        || sandboxTimeout.isNegative()
        || idleTimeout.isNegative()) {
      throw new IllegalArgumentException(
          "timer durations cannot be negative: autoSuspendTimeout "
              + autoSuspendTimeout
              + ", sandboxTimeout "
              + sandboxTimeout
              + ", idleTimeout "
              + idleTimeout);
    }
  }
}
