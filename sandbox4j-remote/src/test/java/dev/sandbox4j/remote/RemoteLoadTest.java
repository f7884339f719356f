package dev.sandbox4j.remote;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * Many clients at once on loopback: 50 clients, each with its own {@link RemoteSandbox} (its own
 * HTTP client), run 20 commands each, spread over 10 sandboxes. Every command must succeed with its
 * own output; the latencies are printed, not asserted (speed belongs to bench/).
 */
class RemoteLoadTest {

  private static final int CLIENTS = 50;
  private static final int EXECS_PER_CLIENT = 20;
  private static final int SANDBOXES = 10;

  @Test
  void fiftyClientsTimesTwentyExecsOnTenSandboxesWithoutAnError() throws Exception {
    try (LoopbackServer server = new LoopbackServer()) {
      RemoteSandbox admin = server.client().build();
      List<WorkspaceRef> sandboxes = new ArrayList<>();
      try {
        for (int i = 0; i < SANDBOXES; i++) {
          sandboxes.add(Workspace.of(admin.newBackend()).open());
        }
        ConcurrentLinkedQueue<Long> latencies = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        CountDownLatch go = new CountDownLatch(1);
        List<Future<?>> clients = new ArrayList<>();
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
          for (int c = 0; c < CLIENTS; c++) {
            int client = c;
            clients.add(
                pool.submit(
                    () -> {
                      RemoteSandbox remote = server.client().build();
                      Workspace ws =
                          Workspace.of(
                              remote.backend(sandboxes.get(client % SANDBOXES)).orElseThrow());
                      go.await();
                      for (int i = 0; i < EXECS_PER_CLIENT; i++) {
                        String token = client + "-" + i;
                        long start = System.nanoTime();
                        try {
                          CommandResult r =
                              ws.run(
                                  Command.argv("echo", token),
                                  RunOptions.withTimeout(Duration.ofSeconds(120)));
                          latencies.add(System.nanoTime() - start);
                          if (r.exitCode() != 0 || !r.stdoutText().equals(token + "\n")) {
                            errors.add(token + ": " + r);
                          }
                        } catch (RuntimeException e) {
                          errors.add(token + ": " + e);
                        }
                      }
                      return null;
                    }));
          }
          go.countDown();
          for (Future<?> f : clients) {
            f.get();
          }
        }
        long[] sorted = latencies.stream().mapToLong(Long::longValue).sorted().toArray();
        System.out.printf(
            "remote load: %d clients x %d execs on %d sandboxes: %d ok, %d errors; latency p50 %.1f"
                + " ms, p99 %.1f ms, max %.1f ms%n",
            CLIENTS,
            EXECS_PER_CLIENT,
            SANDBOXES,
            sorted.length,
            errors.size(),
            percentile(sorted, 0.50),
            percentile(sorted, 0.99),
            sorted.length == 0 ? 0 : sorted[sorted.length - 1] / 1e6);
        assertThat(errors).as("every exec succeeds").isEmpty();
        assertThat(sorted).hasSize(CLIENTS * EXECS_PER_CLIENT);
      } finally {
        sandboxes.forEach(admin::destroy);
      }
    }
  }

  private static double percentile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return 0;
    }
    int index = (int) Math.ceil(p * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(index, sorted.length - 1))] / 1e6;
  }
}
