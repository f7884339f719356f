package dev.sandbox4j.modal;

import io.grpc.Status;
import java.time.Duration;
import java.util.Set;

/**
 * Which gRPC failures a call tries again, and after how long: libmodal's policy for unary calls,
 * three retries after 100 ms, doubling, at most 1 s apart.
 */
final class Retries {
  static final int MAX_RETRIES = 3;
  static final Duration BASE_DELAY = Duration.ofMillis(100);
  static final Duration MAX_DELAY = Duration.ofSeconds(1);

  private static final Set<Status.Code> RETRYABLE =
      Set.of(
          Status.Code.DEADLINE_EXCEEDED,
          Status.Code.UNAVAILABLE,
          Status.Code.CANCELLED,
          Status.Code.INTERNAL,
          Status.Code.UNKNOWN);

  private Retries() {}

  static boolean retryable(Status.Code code) {
    return RETRYABLE.contains(code);
  }

  /** The pause before retry number {@code retry} (0 for the first retry). */
  static Duration delay(int retry) {
    long millis = BASE_DELAY.toMillis() << Math.min(retry, 10);
    return Duration.ofMillis(Math.min(millis, MAX_DELAY.toMillis()));
  }

  static void sleep(Duration delay) {
    try {
      Thread.sleep(delay);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted between retries");
    }
  }
}
