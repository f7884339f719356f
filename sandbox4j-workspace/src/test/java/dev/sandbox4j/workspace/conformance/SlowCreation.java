package dev.sandbox4j.workspace.conformance;

import java.time.Duration;
import java.util.concurrent.CancellationException;

/**
 * What a backend's creation hook runs to make creation slow ({@link WorkspaceConformanceSuite}).
 */
public final class SlowCreation {
  private SlowCreation() {}

  /** Sleeps {@code delay}; an interrupt cancels, as it cancels any workspace operation. */
  public static void sleep(Duration delay) {
    try {
      Thread.sleep(delay);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CancellationException("interrupted while creating slowly");
    }
  }
}
