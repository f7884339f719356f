package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An operator's warm pool (the engine built with {@code warmPool}, {@code serve --warm-pool}): a
 * create asking for the defaults takes a member and gets its own organization's labels and timers;
 * one asking for another shape is created afresh.
 */
class ServerWarmPoolTest {
  private static final Duration FILL = Duration.ofMinutes(2);

  @TempDir Path data;

  @BeforeEach
  void requireEngine() {
    TestServer.requireLocalEngine();
  }

  @Test
  void aDefaultCreateTakesAMemberWithItsOwnLabelsAndTimers() throws Exception {
    LocalSandbox engine = LocalSandbox.builder().warmPool(1).build();
    try (engine;
        TestServer s = new TestServer(data, engine, b -> b)) {
      awaitReady(engine);
      Set<String> members = parked(engine.home());
      String key = s.key("acme");

      String id = s.create(key, "{\"labels\": {\"team\": \"a\"}, \"sandboxTimeoutMs\": 7200000}");

      assertThat(members).as("the create took the pool's member").contains(id);
      SandboxInfo info = engine.info(new WorkspaceRef("local", id)).orElseThrow();
      assertThat(info.labels()).containsEntry("team", "a");
      assertThat(info.timers().sandboxTimeout()).isEqualTo(Duration.ofHours(2));
      List<JsonNode> events = s.exec(key, id, "{\"argv\": [\"id\", \"-un\"]}");
      assertThat(TestServer.stdout(events, "stdout").strip()).isEqualTo("sandbox");
      List<JsonNode> ps =
          s.exec(key, id, "{\"argv\": [\"ps\", \"-e\", \"-o\", \"comm=,pid=,ppid=,args=\"]}");
      String processes = TestServer.stdout(ps, "stdout");
      assertThat(
              processes
                  .lines()
                  .map(l -> l.strip().split("\\s+"))
                  // a helper's parent is outside the sandbox (ppid 0; its keepers' is the helper),
                  // and a helper that ended stays a zombie until the host's init reaps it
                  .filter(f -> f[0].equals("sandbox4j-execd") && f[2].equals("0"))
                  .filter(f -> !String.join(" ", f).contains("<defunct>"))
                  .toList())
          .as("one exec helper: the pool's helper went with the claim%n%s", processes)
          .hasSize(1);

      awaitReady(engine);
      Set<String> refilled = parked(engine.home());
      String other = s.create(key, "{\"cpus\": 2}");
      assertThat(refilled)
          .as("another shape is created afresh, the member stays")
          .doesNotContain(other)
          .isEqualTo(parked(engine.home()));
    }
    assertThat(parked(engine.home())).as("closing the engine destroys the member").isEmpty();
  }

  private static void awaitReady(LocalSandbox engine) throws InterruptedException {
    long end = System.nanoTime() + FILL.toNanos();
    while (engine.warmSandboxes() < 1) {
      if (System.nanoTime() > end) {
        throw new AssertionError("the warm pool held no sandbox after " + FILL);
      }
      Thread.sleep(20);
    }
  }

  private static Set<String> parked(Path home) throws IOException {
    Set<String> ids = new TreeSet<>();
    try (Stream<Path> dirs = Files.list(home.resolve("sandboxes"))) {
      for (Path dir : dirs.toList()) {
        if (Files.exists(dir.resolve("parked"))) {
          ids.add(dir.getFileName().toString());
        }
      }
    }
    return ids;
  }
}
