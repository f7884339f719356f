package dev.sandbox4j.runtime;

import java.time.Duration;

/** What tests of other packages need to know of a provider's warm pool. */
public final class WarmPools {
  private WarmPools() {}

  /**
   * Waits until {@code owner}'s warm pool has a member ready to claim; fails after {@code limit}.
   */
  public static void awaitReady(LocalSandbox owner, Duration limit) throws InterruptedException {
    WarmPool pool = owner.warmPool().orElseThrow(() -> new AssertionError("no warm pool"));
    long end = System.nanoTime() + limit.toNanos();
    while (pool.ready() == 0) {
      if (System.nanoTime() > end) {
        throw new AssertionError("no warm pool member ready within " + limit);
      }
      Thread.sleep(100);
    }
  }
}
