package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link PauseLock} between processes: another process (python3's {@code fcntl.lockf}, the same
 * POSIX record locks as the JDK's) stands in for the supervisor or another JVM starting an exec.
 */
class PauseLockTest {
  private static final String HOLDER =
      """
      import fcntl, os, sys
      fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
      mode = sys.argv[2]
      if mode == "probe":
          try:
              fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
              print("free", flush=True)
          except OSError:
              print("held", flush=True)
          sys.exit(0)
      if mode == "shared":
          fcntl.lockf(fd, fcntl.LOCK_SH, 1, 1 << 40)
      else:
          fcntl.lockf(fd, fcntl.LOCK_EX)
      print("locked", flush=True)
      sys.stdin.read()
      """;

  @TempDir Path sandbox;
  private Process holder;

  @BeforeAll
  static void requirePython() {
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/python3")), "python3 (to hold locks from outside)");
  }

  @AfterEach
  void release() throws Exception {
    if (holder != null) {
      holder.getOutputStream().close();
      holder.waitFor(10, TimeUnit.SECONDS);
    }
  }

  /** Starts a process that holds the lock file {@code mode} ("shared" or "exclusive"). */
  private void holdFromOutside(String mode) throws Exception {
    holder = python(mode);
    assertThat(readLine(holder)).isEqualTo("locked");
  }

  private Process python(String mode) throws Exception {
    return new ProcessBuilder(
            "python3", "-c", HOLDER, sandbox.resolve(PauseLock.FILE).toString(), mode)
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
  }

  private static String readLine(Process p) throws Exception {
    return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))
        .readLine();
  }

  private String probeFromOutside() throws Exception {
    Process probe = python("probe");
    String said = readLine(probe);
    probe.waitFor(10, TimeUnit.SECONDS);
    return said;
  }

  @Test
  void theSupervisorDoesNotPauseWhileAnotherProcessStartsAnExec() throws Exception {
    holdFromOutside("shared");
    AtomicBoolean paused = new AtomicBoolean();
    assertThat(PauseLock.tryPausing(sandbox, () -> paused.set(true))).isFalse();
    assertThat(paused).isFalse();

    holder.getOutputStream().close();
    holder.waitFor(10, TimeUnit.SECONDS);
    holder = null;
    assertThat(PauseLock.tryPausing(sandbox, () -> paused.set(true))).isTrue();
    assertThat(paused).isTrue();
  }

  @Test
  void anExecWaitsForAnotherProcesssPauseToEnd() throws Exception {
    holdFromOutside("exclusive");
    CountDownLatch started = new CountDownLatch(1);
    Thread exec =
        Thread.ofVirtual()
            .start(
                () ->
                    PauseLock.execStarting(
                        sandbox,
                        () -> {
                          started.countDown();
                          return null;
                        }));
    assertThat(started.await(500, TimeUnit.MILLISECONDS)).as("started during the pause").isFalse();
    holder.getOutputStream().close();
    assertThat(started.await(10, TimeUnit.SECONDS)).as("started after the pause").isTrue();
    exec.join();
  }

  /**
   * Closing any descriptor of a file drops every POSIX lock the process holds on it: one thread's
   * exec ending must not drop another's lock, which the other process would then not see.
   */
  @Test
  void oneThreadsExecEndingKeepsAnotherThreadsLockVisibleToOtherProcesses() throws Exception {
    CountDownLatch inside = new CountDownLatch(1);
    CountDownLatch leave = new CountDownLatch(1);
    Thread slow =
        Thread.ofVirtual()
            .start(
                () ->
                    PauseLock.execStarting(
                        sandbox,
                        () -> {
                          inside.countDown();
                          await(leave);
                          return null;
                        }));
    assertThat(inside.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(probeFromOutside()).as("while a thread starts an exec").isEqualTo("held");
    PauseLock.execStarting(sandbox, () -> "another, quick");
    assertThat(probeFromOutside()).as("after another thread's exec started").isEqualTo("held");
    assertThat(PauseLock.tryPausing(sandbox, () -> {})).as("a pause in this JVM").isFalse();
    leave.countDown();
    slow.join();
    assertThat(probeFromOutside()).as("once no exec is starting").isEqualTo("free");
  }

  /**
   * A FileChannel closes when a thread whose interrupt flag is set does I/O on it, dropping every
   * lock the process holds on the file: an exec started by a cancelled thread must not take another
   * thread's lock with it (found by the conformance suite in CI).
   */
  @Test
  void anInterruptedThreadsExecKeepsAnotherThreadsLock() throws Exception {
    CountDownLatch inside = new CountDownLatch(1);
    CountDownLatch leave = new CountDownLatch(1);
    List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
    Thread slow =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    PauseLock.execStarting(
                        sandbox,
                        () -> {
                          inside.countDown();
                          await(leave);
                          return null;
                        });
                  } catch (RuntimeException e) {
                    failures.add(e);
                  }
                });
    assertThat(inside.await(10, TimeUnit.SECONDS)).isTrue();
    Thread.currentThread().interrupt();
    try {
      assertThat(PauseLock.execStarting(sandbox, () -> "started while interrupted"))
          .isEqualTo("started while interrupted");
      assertThat(Thread.currentThread().isInterrupted()).as("the flag, kept").isTrue();
    } finally {
      Thread.interrupted();
    }
    assertThat(probeFromOutside()).as("the other thread's lock, still held").isEqualTo("held");
    leave.countDown();
    slow.join();
    assertThat(failures).as("the other thread's release").isEmpty();
    assertThat(probeFromOutside()).isEqualTo("free");
  }

  @Test
  void aSandboxWithoutStateHereHasOnlyThisJvmsLock() throws Exception {
    Path none = sandbox.resolve("no-such-sandbox");
    assertThat(PauseLock.execStarting(none, () -> "ran")).isEqualTo("ran");
    assertThat(PauseLock.tryPausing(none, () -> {})).isTrue();
    assertThat(none).doesNotExist();
  }

  private static void await(CountDownLatch latch) {
    try {
      latch.await(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
