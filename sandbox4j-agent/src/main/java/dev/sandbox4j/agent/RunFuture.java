package dev.sandbox4j.agent;

import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * A run's future whose {@code cancel} interrupts the run's thread, which kills the command the run
 * is waiting for (a plain {@link CompletableFuture} would only mark itself cancelled while the
 * command went on).
 */
final class RunFuture extends CompletableFuture<RunResult> {

  private volatile Thread thread;

  static RunFuture start(Supplier<RunResult> run) {
    RunFuture future = new RunFuture();
    future.thread =
        Thread.ofVirtual()
            .name("sandbox4j-agent-run")
            .start(
                () -> {
                  try {
                    future.complete(run.get());
                  } catch (Throwable t) {
                    future.completeExceptionally(t);
                  }
                });
    return future;
  }

  @Override
  public boolean cancel(boolean mayInterruptIfRunning) {
    boolean cancelled = super.cancel(mayInterruptIfRunning);
    Thread running = thread;
    if (cancelled && running != null) {
      running.interrupt();
    }
    return cancelled;
  }
}
