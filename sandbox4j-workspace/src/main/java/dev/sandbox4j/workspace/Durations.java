package dev.sandbox4j.workspace;

import java.time.Duration;

final class Durations {
  private Durations() {}

  /** "30s", "1.5s", "250ms": short and exact enough for a message. */
  static String describe(Duration d) {
    if (d.toMillis() < 1000) {
      return d.toMillis() + "ms";
    }
    long millis = d.toMillis();
    return millis % 1000 == 0 ? millis / 1000 + "s" : String.format("%.3fs", millis / 1000.0);
  }
}
