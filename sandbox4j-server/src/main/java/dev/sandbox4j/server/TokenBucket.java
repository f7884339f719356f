package dev.sandbox4j.server;

import java.time.Duration;

/** A token bucket: {@code capacity} tokens, one more every {@code refill}. Thread-safe. */
final class TokenBucket {

  private final int capacity;
  private final long refillNanos;
  private double tokens;
  private long last = System.nanoTime();

  TokenBucket(int capacity, Duration refill) {
    this.capacity = capacity;
    this.refillNanos = Math.max(1, refill.toNanos());
    this.tokens = capacity;
  }

  /** Takes a token: 0 if there was one, else how many milliseconds until there is. */
  synchronized long take() {
    long now = System.nanoTime();
    tokens = Math.min(capacity, tokens + (double) (now - last) / refillNanos);
    last = now;
    if (tokens >= 1) {
      tokens -= 1;
      return 0;
    }
    return (long) Math.ceil((1 - tokens) * refillNanos / 1_000_000.0);
  }
}
