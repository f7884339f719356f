package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Load on loopback: 50 concurrent clients × 20 execs against 10 sandboxes with zero errors. With
 * {@code -Dsandbox4j.loadFigures=true} it also measures the server's overhead per exec and per
 * create (docs/benchmarks.md): figures printed, never asserted, and left out of the build, where
 * they only cost time (bench/'s remote target and {@code exec_true_server_minus_engine} measure the
 * same).
 */
class LoadTest {
  private static final boolean FIGURES = Boolean.getBoolean("sandbox4j.loadFigures");

  @TempDir Path data;

  @Test
  void fiftyClientsTwentyExecsEachTenSandboxesZeroErrors() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s =
        new TestServer(
            data, b -> b.createRateLimit(1000, Duration.ofMillis(1)).requestLog(l -> {}))) {
      String key = s.key("load");
      List<String> sandboxes = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        sandboxes.add(s.create(key, "{}"));
      }
      ConcurrentLinkedQueue<Long> latencies = new ConcurrentLinkedQueue<>();
      ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
      AtomicInteger done = new AtomicInteger();
      List<Thread> clients = new ArrayList<>();
      for (int c = 0; c < 50; c++) {
        int client = c;
        clients.add(
            Thread.ofVirtual()
                .start(
                    () -> {
                      for (int i = 0; i < 20; i++) {
                        String word = "c" + client + "i" + i;
                        long start = System.nanoTime();
                        try {
                          List<JsonNode> events =
                              s.exec(
                                  key,
                                  sandboxes.get(client % 10),
                                  "{\"argv\": [\"echo\", \"" + word + "\"]}");
                          latencies.add(System.nanoTime() - start);
                          JsonNode last = events.getLast();
                          if (!last.path("type").asText().equals("exit")
                              || last.path("exitCode").asInt() != 0
                              || !TestServer.stdout(events, "stdout").equals(word + "\n")) {
                            errors.add(word + ": " + events);
                          }
                          done.incrementAndGet();
                        } catch (Throwable e) {
                          errors.add(word + ": " + e);
                        }
                      }
                    }));
      }
      for (Thread t : clients) {
        t.join();
      }
      assertThat(errors).isEmpty();
      assertThat(done.get()).isEqualTo(1000);
      report("load 50x20 exec echo (ms)", new ArrayList<>(latencies));
      if (!FIGURES) {
        return;
      }

      // sequential exec round trip: through the server, and on the engine directly
      String id = sandboxes.getFirst();
      Workspace direct =
          Workspace.of(
              LocalSandbox.builder()
                  .home(s.engine.home())
                  .build()
                  .backend(new WorkspaceRef(LocalSandbox.NAME, id))
                  .orElseThrow());
      List<Long> viaServer = new ArrayList<>();
      List<Long> local = new ArrayList<>();
      for (int i = 0; i < 220; i++) {
        long t0 = System.nanoTime();
        s.exec(key, id, "{\"argv\": [\"true\"]}");
        long t1 = System.nanoTime();
        direct.run(Command.argv("true"));
        long t2 = System.nanoTime();
        if (i >= 20) { // warm-up
          viaServer.add(t1 - t0);
          local.add(t2 - t1);
        }
      }
      report("exec true via server (ms)", viaServer);
      report("exec true local engine (ms)", local);

      List<Long> create = new ArrayList<>();
      for (int i = 0; i < 22; i++) {
        long t0 = System.nanoTime();
        String fresh = s.create(key, "{}");
        List<JsonNode> events = s.exec(key, fresh, "{\"argv\": [\"node\", \"-v\"]}");
        long t1 = System.nanoTime();
        assertThat(events.getLast().path("exitCode").asInt()).isZero();
        assertThat(s.call(key, "DELETE", "/v1/sandboxes/" + fresh, null).status()).isEqualTo(204);
        if (i >= 2) {
          create.add(t1 - t0);
        }
      }
      report("create + first command via server (ms)", create);
    }
  }

  private static void report(String what, List<Long> nanos) {
    Collections.sort(nanos);
    double p50 = nanos.get((int) Math.ceil(nanos.size() * 0.50) - 1) / 1e6;
    double p99 = nanos.get((int) Math.ceil(nanos.size() * 0.99) - 1) / 1e6;
    double max = nanos.getLast() / 1e6;
    System.out.printf(
        "LOAD %s: n=%d p50=%.1f p99=%.1f max=%.1f%n", what, nanos.size(), p50, p99, max);
  }
}
