package dev.sandbox4j.runtime.internal.ports;

/**
 * The activity stamps of one connection: touched at most once a second; bytes from the client first
 * wake the sandbox if it fell asleep since (checked at most every {@link #WAKE_CHECK_NANOS}).
 */
final class Activity {
  private static final long TOUCH_EVERY_NANOS = 1_000_000_000L;
  static final long WAKE_CHECK_NANOS = 100_000_000L;

  private final PortTargets targets;
  private final String id;
  private volatile long lastTouch = System.nanoTime();
  private volatile long lastWakeCheck = System.nanoTime();

  Activity(PortTargets targets, String id) {
    this.targets = targets;
    this.id = id;
  }

  void touch() {
    long now = System.nanoTime();
    if (now - lastTouch > TOUCH_EVERY_NANOS) {
      lastTouch = now;
      targets.touch(id);
    }
  }

  void wake() {
    long now = System.nanoTime();
    if (now - lastWakeCheck > WAKE_CHECK_NANOS) {
      lastWakeCheck = now;
      lastTouch = now;
      targets.touch(id); // before waking: the supervisor must not suspend it again
      targets.wake(id); // unavailable once destroyed: ends the pipe
    } else {
      touch();
    }
  }
}
