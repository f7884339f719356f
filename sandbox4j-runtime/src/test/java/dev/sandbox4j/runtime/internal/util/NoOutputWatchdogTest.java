package dev.sandbox4j.runtime.internal.util;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.RunOptions;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The watchdog's clock against a fake freezer. Every check here is a lower bound on when the kill
 * came, measured from a moment the test records before it acts: a slow machine only makes the kill
 * later, so a bound that holds on a quiet machine holds on a loaded one.
 */
class NoOutputWatchdogTest {
  private static final Duration LIMIT = Duration.ofSeconds(1);

  @Test
  void aSilentCommandIsKilledOnceTheLimitHasPassed() throws Exception {
    CompletableFuture<Long> killed = new CompletableFuture<>();
    long start = System.nanoTime();
    try (NoOutputWatchdog w =
        NoOutputWatchdog.start(LIMIT, () -> false, () -> killed.complete(System.nanoTime()))) {
      long at = killed.get(30, TimeUnit.SECONDS);
      assertThat(at - start).isGreaterThanOrEqualTo(LIMIT.toNanos());
      assertThat(w.fired()).isTrue();
    }
  }

  @Test
  void outputRestartsTheClock() throws Exception {
    CompletableFuture<Long> killed = new CompletableFuture<>();
    try (NoOutputWatchdog w =
        NoOutputWatchdog.start(LIMIT, () -> false, () -> killed.complete(System.nanoTime()))) {
      RunOptions watched = w.watching(RunOptions.defaults());
      Thread.sleep(LIMIT.toMillis() / 2);
      long printed = System.nanoTime();
      watched.onStdout().accept(new byte[] {'x'});
      long at = killed.get(30, TimeUnit.SECONDS);
      assertThat(at - printed).isGreaterThanOrEqualTo(LIMIT.toNanos());
    }
  }

  /**
   * Half the limit silent, then frozen for less than the limit, then thawed: the resumed command
   * has the whole limit again (less one tick, the watchdog's last look at the frozen sandbox). Seen
   * only when the limit could be reached, this freeze would be missed or its end looked at too
   * late, leaving the command a fraction of its limit after the thaw.
   */
  @Test
  void aFreezeShorterThanTheLimitRestartsTheClockFromTheThaw() throws Exception {
    AtomicBoolean frozen = new AtomicBoolean();
    CompletableFuture<Long> killed = new CompletableFuture<>();
    try (NoOutputWatchdog w =
        NoOutputWatchdog.start(LIMIT, frozen::get, () -> killed.complete(System.nanoTime()))) {
      Thread.sleep(LIMIT.toMillis() / 2);
      frozen.set(true);
      Thread.sleep(LIMIT.toMillis() * 7 / 10);
      long thawed = System.nanoTime();
      frozen.set(false);
      long at = killed.get(30, TimeUnit.SECONDS);
      assertThat(at - thawed)
          .as("nanoseconds from the thaw to the kill")
          .isGreaterThanOrEqualTo(LIMIT.minus(NoOutputWatchdog.tick(LIMIT)).toNanos());
      assertThat(w.fired()).isTrue();
    }
  }

  @Test
  void aCommandFrozenForLongerThanTheLimitIsNotKilledWhileFrozen() throws Exception {
    AtomicBoolean frozen = new AtomicBoolean(true);
    CompletableFuture<Long> killed = new CompletableFuture<>();
    try (NoOutputWatchdog w =
        NoOutputWatchdog.start(LIMIT, frozen::get, () -> killed.complete(System.nanoTime()))) {
      Thread.sleep(LIMIT.toMillis() * 3);
      assertThat(killed).as("killed while frozen").isNotDone();
      long thawed = System.nanoTime();
      frozen.set(false);
      long at = killed.get(30, TimeUnit.SECONDS);
      assertThat(at - thawed)
          .isGreaterThanOrEqualTo(LIMIT.minus(NoOutputWatchdog.tick(LIMIT)).toNanos());
    }
  }

  @Test
  void aWatchdogClosedBeforeTheLimitNeverFires() throws Exception {
    CompletableFuture<Long> killed = new CompletableFuture<>();
    NoOutputWatchdog w =
        NoOutputWatchdog.start(LIMIT, () -> false, () -> killed.complete(System.nanoTime()));
    w.close();
    Thread.sleep(LIMIT.toMillis() * 2);
    assertThat(killed).isNotDone();
    assertThat(w.fired()).isFalse();
  }

  @Test
  void theTickIsATenthOfTheLimitAndAtMostAQuarterSecond() {
    assertThat(NoOutputWatchdog.tick(Duration.ofSeconds(1))).isEqualTo(Duration.ofMillis(100));
    assertThat(NoOutputWatchdog.tick(Duration.ofMinutes(5))).isEqualTo(Duration.ofMillis(250));
    assertThat(NoOutputWatchdog.tick(Duration.ofNanos(5))).isEqualTo(Duration.ofNanos(1));
  }
}
