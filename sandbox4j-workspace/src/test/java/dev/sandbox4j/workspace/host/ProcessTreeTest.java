package dev.sandbox4j.workspace.host;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How {@link ProcessTree} reads {@code /proc}, on a directory of the same shape: a marked process
 * caught inside {@code execve} reads as an empty environment for a moment, and must not be taken
 * for a process that has none.
 */
class ProcessTreeTest {
  private static final byte[] NEEDLE = ProcessTree.needle("run-1");
  private static final String RUNNING = "S 1 10 10 0 -1 4194560";
  private static final String ZOMBIE = "Z 1 10 10 0 -1 4194564";
  private static final String KERNEL_THREAD = "S 2 0 0 0 -1 2129984"; // PF_KTHREAD set

  @TempDir Path proc;

  @Test
  void findsMarkedProcessesAndSetsAsideBlankOnes() throws IOException {
    process(101, RUNNING, "A=1\0SANDBOX4J_HOST_RUN=run-1x\0");
    process(102, RUNNING, "SANDBOX4J_HOST_RUN=run-1y\0");
    process(103, RUNNING, "A=1\0SANDBOX4J_HOST_RUN=run-2\0"); // another run's
    process(104, RUNNING, "A=SANDBOX4J_HOST_RUN=run-1\0"); // the marker inside a value
    process(105, RUNNING, ""); // exec'ing, or an empty environment
    process(106, ZOMBIE, "");
    process(107, KERNEL_THREAD, "");

    ProcessTree.Scan scan = ProcessTree.scan(proc, NEEDLE);

    assertThat(scan.marked()).containsExactlyInAnyOrder(101L, 102L);
    assertThat(scan.blank()).containsExactly(105L);
  }

  @Test
  void aBlankProcessThatShowsTheMarkerSoonIsMarked() throws Exception {
    process(105, RUNNING, "");
    CompletableFuture<Void> execDone =
        CompletableFuture.runAsync(
            () -> write(105, "environ", "SANDBOX4J_HOST_RUN=run-1x\0"),
            CompletableFuture.delayedExecutor(5, TimeUnit.MILLISECONDS));

    assertThat(ProcessTree.anyTurnsOutMarked(proc, List.of(105L), NEEDLE)).isTrue();
    execDone.join();
  }

  @Test
  void aBlankProcessThatStaysBlankOrShowsAnotherEnvironmentIsNot() throws IOException {
    process(105, RUNNING, "");
    process(106, RUNNING, "A=1\0");
    long start = System.nanoTime();

    assertThat(ProcessTree.anyTurnsOutMarked(proc, List.of(105L, 106L), NEEDLE)).isFalse();
    assertThat(System.nanoTime() - start)
        .as("it gave up on the blank one after a while (not a speed goal: a bound against hangs)")
        .isLessThan(TimeUnit.SECONDS.toNanos(10));
  }

  @Test
  void aBlankProcessThatDiesIsNot() throws IOException {
    process(105, RUNNING, "");
    CompletableFuture<Void> died =
        CompletableFuture.runAsync(
            () -> write(105, "stat", "105 (sh) " + ZOMBIE),
            CompletableFuture.delayedExecutor(5, TimeUnit.MILLISECONDS));

    assertThat(ProcessTree.anyTurnsOutMarked(proc, List.of(105L), NEEDLE)).isFalse();
    died.join();
  }

  private void process(long pid, String statAfterComm, String environ) throws IOException {
    Files.createDirectories(proc.resolve(Long.toString(pid)));
    write(pid, "stat", pid + " (a (b) c) " + statAfterComm); // comm with spaces and parens
    write(pid, "environ", environ);
  }

  private void write(long pid, String file, String content) {
    try {
      Path target = proc.resolve(Long.toString(pid)).resolve(file);
      Path tmp = target.resolveSibling(file + ".tmp");
      Files.writeString(tmp, content, StandardCharsets.ISO_8859_1);
      Files.move(tmp, target, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
