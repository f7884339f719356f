package dev.sandbox4j.remote;

import java.time.Duration;
import java.time.Instant;

/**
 * A remote sandbox's timers; a zero duration means the timer is off.
 *
 * @param autoSuspendTimeout idle time before it is suspended
 * @param sandboxTimeout its whole lifetime
 * @param idleTimeout idle time before it is destroyed
 * @param deleteAfter when it is destroyed, or null
 * @param ends when a timer destroys it at the latest, or null if the server does not say
 */
public record SandboxTimers(
    Duration autoSuspendTimeout,
    Duration sandboxTimeout,
    Duration idleTimeout,
    Instant deleteAfter,
    Instant ends) {

  /** Turns absent durations into zero (off). */
  public SandboxTimers {
    autoSuspendTimeout = autoSuspendTimeout == null ? Duration.ZERO : autoSuspendTimeout;
    sandboxTimeout = sandboxTimeout == null ? Duration.ZERO : sandboxTimeout;
    idleTimeout = idleTimeout == null ? Duration.ZERO : idleTimeout;
  }
}
