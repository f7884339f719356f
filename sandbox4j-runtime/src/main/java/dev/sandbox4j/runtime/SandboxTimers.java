package dev.sandbox4j.runtime;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * The timers of a sandbox, as {@link LocalSandbox.Builder} set them when it was created. They are
 * enforced by the state directory's supervisor process (see {@link LocalSandbox}), also when no JVM
 * of the user runs, and they survive a restart of it or of the user's JVM: deadlines are absolute
 * instants and idleness is read from disk.
 *
 * @param autoSuspendTimeout idle time after which the sandbox is suspended; zero: never
 * @param sandboxTimeout its total lifetime from creation, after which it is destroyed
 * @param idleTimeout idle time after which it is destroyed; zero: never
 * @param deleteAfter when it is destroyed, or null for no such point in time
 * @param ends when it is destroyed at the latest: creation plus {@code sandboxTimeout}, or {@code
 *     deleteAfter} if that is earlier
 */
public record SandboxTimers(
    Duration autoSuspendTimeout,
    Duration sandboxTimeout,
    Duration idleTimeout,
    Instant deleteAfter,
    Instant ends) {

  /** Checks that every value but {@code deleteAfter} is there and no duration is negative. */
  public SandboxTimers {
    Objects.requireNonNull(autoSuspendTimeout, "autoSuspendTimeout");
    Objects.requireNonNull(sandboxTimeout, "sandboxTimeout");
    Objects.requireNonNull(idleTimeout, "idleTimeout");
    Objects.requireNonNull(ends, "ends");
    if (autoSuspendTimeout.isNegative()
        || sandboxTimeout.isNegative()
        || idleTimeout.isNegative()) {
      throw new IllegalArgumentException("timer durations cannot be negative");
    }
  }
}
