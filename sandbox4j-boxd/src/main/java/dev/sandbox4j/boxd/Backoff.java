package dev.sandbox4j.boxd;

import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ThreadLocalRandom;

/** Exponential backoff with jitter between retries, as boxd's SDKs retry: 0.5 s, 1 s, 2 s, ... */
final class Backoff {

  static final Duration FIRST = Duration.ofMillis(500);
  static final Duration MAX = Duration.ofSeconds(8);

  private Backoff() {}

  /** How long to wait before retry {@code attempt + 1}: doubling, capped, with ±25 % jitter. */
  static Duration delay(int attempt) {
    long base = Math.min(MAX.toMillis(), FIRST.toMillis() << Math.min(attempt, 10));
    long jitter = ThreadLocalRandom.current().nextLong(-base / 4, base / 4 + 1);
    return Duration.ofMillis(base + jitter);
  }

  /** Sleeps {@link #delay(int)}; an interrupt cancels the retrying call. */
  static void sleep(int attempt) {
    try {
      Thread.sleep(delay(attempt));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CancellationException("interrupted while waiting to retry a boxd call");
    }
  }
}
