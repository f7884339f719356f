package dev.sandbox4j.workspace.conformance;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceReadOnlyException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * The workspace contract (see {@code dev.sandbox4j.workspace} package-info and {@code DESIGN.md}),
 * one test per rule; a failure message quotes the rule it checks.
 *
 * <p>A backend's test extends this class and supplies its provider. Rules that only an isolating
 * backend can keep (no path reaches a host file, the workspace has its own home) run only when
 * {@link #isolatesFromHost()} is true; it is false for the host-directory backend alone. The
 * workspace needs POSIX {@code sh}, coreutils, {@code setsid} and {@code mkfifo}. Liveness checks
 * use generous bounds (never speed goals) so that a hang fails instead of stalling the build.
 *
 * <p>Each test has its own workspaces. The few rules that mostly wait (for a timeout, a deadline or
 * a drain grace) are {@link ExecutionMode#CONCURRENT}: where the build runs tests in parallel they
 * wait beside the others instead of adding their waits to the suite's time, which is paid once per
 * backend. A provider must serve concurrent callers anyway (the server does).
 */
public abstract class WorkspaceConformanceSuite {

  /**
   * An upper bound for things that should take milliseconds; only there to turn hangs into
   * failures.
   */
  private static final Duration HANG_BOUND = Duration.ofSeconds(20);

  /** The variable the build sets in the JVM's environment; it must never reach a workspace. */
  static final String HOST_CANARY = "SANDBOX4J_CONFORMANCE_HOST_CANARY";

  private final List<Workspace> opened = new CopyOnWriteArrayList<>();
  private final Set<Runnable> cleanups = ConcurrentHashMap.newKeySet();

  /** The provider under test; called once per test. */
  protected abstract WorkspaceProvider provider();

  /**
   * A backend for a fresh workspace whose every command gets {@code env} (a command's own env is
   * layered on top). Does no I/O.
   */
  protected abstract WorkspaceBackend newBackendWithEnv(Map<String, String> env);

  /**
   * A backend for a fresh workspace whose creation, on first use, takes {@code delay} longer than
   * usual (the backend waits that long inside the operation that creates it, before creating). The
   * suite destroys it through {@link #provider()}. Does no I/O. It lets the suite check that a
   * timeout's clock starts after acquisition: with creation faster than any timeout, a clock
   * started before acquisition would go unnoticed.
   */
  protected abstract WorkspaceBackend newBackendSlowToCreate(Duration delay);

  /**
   * Whether the backend isolates the workspace from the host. Only the host-directory backend,
   * which isolates nothing, returns false; that skips the isolation rules for it alone.
   */
  protected boolean isolatesFromHost() {
    return true;
  }

  /**
   * Whether every buffer between a stdin write and the command is bounded well under 32 MiB. A
   * backend whose stdin crosses a byte stream with no acknowledgement from the far end (the
   * Kubernetes pod exec WebSocket) cannot promise it: the TCP buffers on the way (32 MiB of receive
   * buffer on this host's loopback alone) take a flood before any write waits, so {@code
   * backgroundStdinWaitEndsWithTheDeadline} is skipped for it, and said in its docs.
   */
  protected boolean boundsStdinInFlight() {
    return true;
  }

  /** Takes a background command's stdout into {@code out} until it is {@code expected}. */
  private static void awaitStdout(BackgroundCommand command, StringBuilder out, String expected)
      throws InterruptedException {
    long end = System.nanoTime() + HANG_BOUND.toNanos();
    while (!out.toString().equals(expected)) {
      assertThat(out.toString())
          .as("stdout so far")
          .isEqualTo(expected.substring(0, Math.min(expected.length(), out.length())));
      assertThat(System.nanoTime())
          .as("the background command did not answer: " + out + "; " + command)
          .isLessThan(end);
      out.append(command.takeOutput().stdoutText());
      Thread.sleep(10);
    }
  }

  /** Wraps a backend; a subclass may restrict what the workspace sees of it. */
  protected Workspace workspaceOf(WorkspaceBackend backend) {
    return Workspace.of(backend);
  }

  private WorkspaceProvider provider;

  private WorkspaceProvider theProvider() {
    if (provider == null) {
      provider = provider();
    }
    return provider;
  }

  /** A fresh workspace, destroyed after the test. */
  protected Workspace newWorkspace() {
    return track(workspaceOf(theProvider().newBackend()));
  }

  private Workspace track(Workspace ws) {
    opened.add(ws);
    return ws;
  }

  private Workspace attach(WorkspaceRef ref) {
    return workspaceOf(
        theProvider()
            .backend(ref)
            .orElseThrow(() -> new AssertionError("provider refused its own ref " + ref)));
  }

  @AfterEach
  void destroyWorkspaces() {
    cleanups.forEach(Runnable::run);
    for (Workspace ws : opened) {
      ws.ref().ifPresent(ref -> theProvider().destroy(ref));
    }
  }

  // ---- helpers ----------------------------------------------------------------------------

  private static CommandResult sh(Workspace ws, String script) {
    return ws.run(Command.shell(script), RunOptions.withTimeout(HANG_BOUND));
  }

  private static String shOk(Workspace ws, String script) {
    CommandResult r = sh(ws, script);
    assertThat(r.exitCode())
        .as(
            "setup command failed: %s%nstdout: %s%nstderr: %s",
            script, r.stdoutText(), r.stderrText())
        .isZero();
    return r.stdoutText();
  }

  /**
   * Prints "alive NAME PID STATE" for each pid file whose process still runs (zombies count as
   * dead). The state is read once, first: a killed tree's zombies are reaped by the sandbox's init
   * while this runs, and a process reaped between an existence check and the read of its state
   * looked alive, with no state to show (the likely cause of two CI failures under gVisor, where a
   * setsid'd process, the first one checked, was reported alive; not reproduced here). A state that
   * cannot be read while {@code /proc/PID} is still there counts as alive.
   */
  private static final String REPORT_ALIVE =
      """
      for f in "$@"; do
        p=$(cat "$f")
        case "$p" in ''|*[!0-9]*) echo "no pid in $f: '$p'"; continue ;; esac
        st=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)
        case "$st" in
          Z) ;;
          '') if [ -e "/proc/$p" ]; then echo "alive $f $p (state unreadable)"; fi ;;
          *) echo "alive $f $p $st" ;;
        esac
      done
      """;

  private static String aliveProcesses(Workspace ws, String... pidFiles) {
    List<String> argv = new ArrayList<>(List.of("/bin/sh", "-c", REPORT_ALIVE, "sh"));
    argv.addAll(List.of(pidFiles));
    return ws.run(Command.argv(argv), RunOptions.withTimeout(HANG_BOUND)).stdoutText();
  }

  /**
   * Starts a setsid'd grandchild, a daemonized grandchild and a plain child, each writing a pid
   * file, waits until all three exist, prints "ready", then sleeps.
   */
  private static final String SPAWN_TREE =
      """
      rm -f s.pid d.pid c.pid
      setsid sh -c 'echo $$ > s.pid.tmp; mv s.pid.tmp s.pid; exec sleep 300' &
      sh -c 'sleep 300 & echo $! > d.pid.tmp; mv d.pid.tmp d.pid' &
      sleep 300 & echo $! > c.pid.tmp; mv c.pid.tmp c.pid
      while [ ! -s s.pid ] || [ ! -s d.pid ] || [ ! -s c.pid ]; do sleep 0.02; done
      echo ready
      echo ready-err >&2
      sleep 300
      """;

  private static byte[] randomBytes(int size, long seed) {
    byte[] data = new byte[size];
    new Random(seed).nextBytes(data);
    return data;
  }

  private static String sha256(byte[] data) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
  }

  private static <T> T within(Duration bound, Future<T> future, String what) throws Exception {
    try {
      return future.get(bound.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      future.cancel(true);
      throw new AssertionError(what + " did not finish within " + bound + " (it hangs)");
    }
  }

  private static ExecutorService threads() {
    return Executors.newVirtualThreadPerTaskExecutor();
  }

  // ---- refs and lifecycle ------------------------------------------------------------------

  @Nested
  @DisplayName("Refs and lifecycle")
  class Lifecycle {

    @Test
    @DisplayName("building a backend does no I/O: no ref until the first operation")
    void constructionIsLazy() {
      Workspace ws = newWorkspace();
      assertThat(ws.ref())
          .as("rule: building a backend does no I/O; the ref appears on creation")
          .isEmpty();
      ws.workingDirectory();
      assertThat(ws.ref()).as("rule: the ref is known as soon as creation returns").isPresent();
    }

    @Test
    @DisplayName(
        "a ref names its provider, never holds credentials, and round-trips as provider:id")
    void refRoundTrips() {
      Workspace ws = newWorkspace();
      WorkspaceRef ref = ws.open();
      assertThat(ref.provider()).isEqualTo(theProvider().name());
      assertThat(WorkspaceRef.parse(ref.toString())).isEqualTo(ref);
    }

    @Test
    @DisplayName("the ref is stable across operations")
    void refIsStable() {
      Workspace ws = newWorkspace();
      WorkspaceRef first = ws.open();
      sh(ws, "true");
      ws.writeText("a.txt", "a");
      assertThat(ws.ref()).as("rule: a workspace keeps its ref").contains(first);
    }

    @Test
    @DisplayName("concurrent first use creates exactly one workspace")
    void concurrentFirstUseCreatesOne() throws Exception {
      Workspace ws = newWorkspace();
      int callers = 8;
      CountDownLatch start = new CountDownLatch(1);
      List<Future<String>> dirs = new ArrayList<>();
      try (ExecutorService pool = threads()) {
        for (int i = 0; i < callers; i++) {
          int n = i;
          dirs.add(
              pool.submit(
                  () -> {
                    start.await();
                    ws.writeText("caller-" + n, "x");
                    return ws.workingDirectory();
                  }));
        }
        start.countDown();
        for (Future<String> dir : dirs) {
          assertThat(within(HANG_BOUND, dir, "concurrent first use"))
              .as("rule: concurrent first use creates exactly one workspace")
              .isEqualTo(ws.workingDirectory());
        }
      }
      assertThat(
              ws.list(".").stream().map(DirectoryEntry::name).filter(n -> n.startsWith("caller-")))
          .as("every caller wrote into the same workspace")
          .hasSize(callers);
    }

    @Test
    @DisplayName("attaching by ref reaches the same workspace")
    void attachReachesSameWorkspace() {
      Workspace ws = newWorkspace();
      ws.writeText("note.txt", "from the first backend");
      shOk(ws, "echo from-a-command > cmd.txt");
      Workspace again = attach(ws.open());
      assertThat(again.readText("note.txt")).isEqualTo("from the first backend");
      assertThat(again.readText("cmd.txt")).isEqualTo("from-a-command\n");
      assertThat(again.workingDirectory()).isEqualTo(ws.workingDirectory());
      assertThat(again.ref()).contains(ws.open());
    }

    @Test
    @DisplayName("a backend for another provider's ref is not offered")
    void foreignRefIsNotOffered() {
      WorkspaceRef foreign = new WorkspaceRef("no-such-provider-x", "abc");
      assertThat(theProvider().backend(foreign)).isEmpty();
      assertThatThrownBy(() -> theProvider().destroy(foreign))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("no-such-provider-x");
    }

    @Test
    @DisplayName("destroy then attach is unavailable, never an empty replacement")
    void destroyedIsUnavailable() {
      Workspace ws = newWorkspace();
      ws.writeText("keep.txt", "x");
      WorkspaceRef ref = ws.open();
      theProvider().destroy(ref);
      Workspace again = attach(ref);
      assertThatThrownBy(() -> sh(again, "true"))
          .as("rule: attaching to a ref whose workspace is gone raises unavailable")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> again.readText("keep.txt"))
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(again::workingDirectory).isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> sh(again, "true"))
          .as("rule: it never creates an empty replacement (a second try is still unavailable)")
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> sh(ws, "true"))
          .as("the backend that created it sees it gone too")
          .isInstanceOf(WorkspaceUnavailableException.class);
    }

    @Test
    @DisplayName("destroy is idempotent")
    void destroyTwice() {
      Workspace ws = newWorkspace();
      WorkspaceRef ref = ws.open();
      theProvider().destroy(ref);
      assertThatCode(() -> theProvider().destroy(ref))
          .as("rule: destroy(ref) is idempotent")
          .doesNotThrowAnyException();
    }

    @Test
    @DisplayName("destroy during a running command makes that command fail with unavailable")
    void destroyDuringCommand() throws Exception {
      Workspace ws = newWorkspace();
      WorkspaceRef ref = ws.open();
      try (ExecutorService pool = threads()) {
        Future<CommandResult> running =
            pool.submit(
                () ->
                    ws.run(
                        Command.shell("echo started > started.txt; sleep 300"),
                        RunOptions.defaults()));
        awaitFile(ws, "started.txt", running);
        theProvider().destroy(ref);
        assertThatThrownBy(
                () -> within(HANG_BOUND, running, "the command in a destroyed workspace"))
            .as("rule: a command running when its workspace is destroyed fails with unavailable")
            .isInstanceOf(ExecutionException.class)
            .cause()
            .isInstanceOf(WorkspaceUnavailableException.class);
      }
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    @DisplayName("a timeout's clock starts after the workspace is acquired")
    void timeoutStartsAfterAcquisition() {
      Duration timeout = Duration.ofSeconds(2); // `true` takes milliseconds once acquired
      Duration creation = timeout.plusSeconds(1); // a clock started before it would run out
      // not created yet: creation happens inside run, and takes longer than the timeout
      Workspace ws = track(workspaceOf(newBackendSlowToCreate(creation)));
      long start = System.nanoTime();
      CommandResult r;
      try {
        r = ws.run(Command.argv("true"), RunOptions.withTimeout(timeout));
      } catch (WorkspaceTimeoutException e) {
        throw new AssertionError(
            "rule: a timeout's clock starts after the workspace is acquired; creating it took "
                + creation
                + " and the "
                + timeout
                + " timeout of `true` ran out",
            e);
      }
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      assertThat(took)
          .as("the workspace was created (slowly) inside run, so the rule was exercised")
          .isGreaterThanOrEqualTo(creation);
      assertThat(r.exitCode()).isZero();
    }
  }

  private static void awaitFile(Workspace ws, String path, Future<?> running) throws Exception {
    long end = System.nanoTime() + HANG_BOUND.toNanos();
    while (!ws.exists(path)) {
      if (running.isDone()) {
        running.get(); // surfaces the failure
        fail("the command ended before creating " + path);
      }
      if (System.nanoTime() > end) {
        fail("the command did not create " + path + " within " + HANG_BOUND);
      }
      Thread.sleep(10);
    }
  }

  // ---- commands -------------------------------------------------------------------------------

  @Nested
  @DisplayName("Commands")
  class Commands {

    @Test
    @DisplayName("argv is passed literally, without a shell")
    void argvIsLiteral() {
      Workspace ws = newWorkspace();
      CommandResult r = ws.run(Command.argv("printf", "%s|", "a b", "*", "$HOME", "'q'", ""));
      assertThat(r.stdoutText()).isEqualTo("a b|*|$HOME|'q'||");
    }

    @Test
    @DisplayName("a shell string runs under /bin/sh -c")
    void shellRuns() {
      Workspace ws = newWorkspace();
      CommandResult r = ws.run(Command.shell("x=$((40 + 2)); echo \"$x\" | tr 4 y; echo err >&2"));
      assertThat(r.stdoutText()).isEqualTo("y2\n");
      assertThat(r.stderrText()).isEqualTo("err\n");
      assertThat(r.exitCode()).isZero();
    }

    @Test
    @DisplayName("a non-zero exit is a result, not an error")
    void nonZeroExitIsResult() {
      Workspace ws = newWorkspace();
      assertThat(sh(ws, "echo out; exit 7").exitCode()).isEqualTo(7);
    }

    @Test
    @DisplayName("stdin is at EOF unless given")
    void stdinAtEof() {
      Workspace ws = newWorkspace();
      // cat would wait forever on an open stdin; the timeout turns that into a failure
      CommandResult r = ws.run(Command.argv("cat"), RunOptions.withTimeout(HANG_BOUND));
      assertThat(r.exitCode()).as("rule: stdin is at EOF unless given").isZero();
      assertThat(r.stdout()).isEmpty();
    }

    @Test
    @DisplayName("stdin bytes and streams reach the command, binary-safe")
    void stdinIsFed() throws Exception {
      Workspace ws = newWorkspace();
      byte[] data = randomBytes(1024 * 1024 + 17, 1);
      CommandResult fromBytes =
          ws.run(
              Command.argv("sha256sum"),
              RunOptions.builder().stdin(data).timeout(HANG_BOUND).build());
      assertThat(fromBytes.stdoutText()).startsWith(sha256(data));
      CommandResult fromStream =
          ws.run(
              Command.argv("cat"),
              RunOptions.builder()
                  .stdin(new ByteArrayInputStream(data))
                  .timeout(HANG_BOUND)
                  .build());
      assertThat(fromStream.stdout()).isEqualTo(data);
    }

    @Test
    @DisplayName("a stdin source that fails kills the command instead of ending its input early")
    void failingStdinKillsCommand() {
      Workspace ws = newWorkspace();
      InputStream failing =
          new InputStream() {
            private int left = 100_000;

            @Override
            public int read() throws IOException {
              if (left-- <= 0) {
                throw new IOException("source broke");
              }
              return 'x';
            }
          };
      assertThatThrownBy(
              () ->
                  ws.run(
                      Command.shell("cat > got.txt; echo done > finished"),
                      RunOptions.builder().stdin(failing).timeout(HANG_BOUND).build()))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceException.class)
          .hasRootCauseMessage("source broke");
      assertThat(ws.exists("finished"))
          .as("the command never saw end of input, so it never went on as if it were complete")
          .isFalse();
    }

    @Test
    @DisplayName("a missing program exits 127")
    void missingProgram() {
      Workspace ws = newWorkspace();
      assertThat(ws.run(Command.argv("sandbox4j-no-such-program")).exitCode())
          .as("rule: a missing program exits 127 (argv)")
          .isEqualTo(127);
      assertThat(sh(ws, "sandbox4j-no-such-program").exitCode())
          .as("rule: a missing program exits 127 (shell)")
          .isEqualTo(127);
    }

    @Test
    @DisplayName("a non-executable program exits 126")
    void nonExecutable() {
      Workspace ws = newWorkspace();
      ws.writeText("script.sh", "#!/bin/sh\necho hi\n");
      shOk(ws, "chmod 644 script.sh");
      assertThat(ws.run(Command.argv("./script.sh")).exitCode())
          .as("rule: a non-executable program exits 126")
          .isEqualTo(126);
    }

    @Test
    @DisplayName("output is bytes; text views decode invalid UTF-8 as U+FFFD")
    void invalidUtf8() {
      Workspace ws = newWorkspace();
      CommandResult r = sh(ws, "printf 'ok\\377\\376end'; printf '\\303' >&2");
      assertThat(r.stdout()).containsExactly('o', 'k', 0xff, 0xfe, 'e', 'n', 'd');
      assertThat(r.stdoutText()).isEqualTo("ok\uFFFD\uFFFDend");
      assertThat(r.stderrText()).isEqualTo("\uFFFD");
    }

    @Test
    @DisplayName("output is never silently truncated (5 MiB stdout and 1 MiB stderr at once)")
    void noTruncation() {
      Workspace ws = newWorkspace();
      CommandResult r =
          sh(
              ws,
              "head -c 1048576 /dev/zero | tr '\\0' e >&2 & head -c 5242880 /dev/zero | tr '\\0' o; wait");
      assertThat(r.stdout()).hasSize(5 * 1024 * 1024);
      assertThat(r.stderr()).hasSize(1024 * 1024);
      assertThat(r.stdoutText()).matches("o+");
      assertThat(r.stderrText()).matches("e+");
    }

    @Test
    @DisplayName("output is streamed to callbacks as it arrives, and kept in the result")
    void streamingCallbacks() {
      Workspace ws = newWorkspace();
      StringBuilder out = new StringBuilder();
      StringBuilder err = new StringBuilder();
      CommandResult r =
          ws.run(
              Command.shell("for i in 1 2 3; do echo out$i; echo err$i >&2; done"),
              RunOptions.builder()
                  .onStdout(chunk -> out.append(new String(chunk, StandardCharsets.UTF_8)))
                  .onStderr(chunk -> err.append(new String(chunk, StandardCharsets.UTF_8)))
                  .timeout(HANG_BOUND)
                  .build());
      assertThat(out.toString()).isEqualTo("out1\nout2\nout3\n").isEqualTo(r.stdoutText());
      assertThat(err.toString()).isEqualTo("err1\nerr2\nerr3\n").isEqualTo(r.stderrText());
    }

    @Test
    @DisplayName(
        "output over the limit (10 MiB) kills the whole tree and keeps 64 KiB of each stream")
    void outputLimit() {
      Workspace ws = newWorkspace();
      String script =
          """
          sleep 300 & echo $! > c.pid
          setsid sh -c 'echo $$ > s.pid.tmp; mv s.pid.tmp s.pid; exec sleep 300' &
          while [ ! -s s.pid ]; do sleep 0.02; done
          echo starting >&2
          exec yes 0123456789abcdef
          """;
      assertThatThrownBy(() -> ws.run(Command.shell(script), RunOptions.withTimeout(HANG_BOUND)))
          .as("rule: combined output over the limit raises WorkspaceOutputLimitException")
          .isInstanceOfSatisfying(
              WorkspaceOutputLimitException.class,
              e -> {
                assertThat(e.limit()).isEqualTo(10L * 1024 * 1024);
                assertThat(e.stdoutHead()).hasSize(64 * 1024);
                assertThat(e.stdoutHeadText()).startsWith("0123456789abcdef\n0123456789abcdef\n");
                assertThat(e.stderrHeadText()).isEqualTo("starting\n");
              });
      assertThat(aliveProcesses(ws, "c.pid", "s.pid"))
          .as("rule: the output limit kills every process the command started")
          .isEmpty();
      assertThat(sh(ws, "echo still-up").stdoutText()).isEqualTo("still-up\n");
    }

    @Test
    @DisplayName("a custom output limit is exact: the limit passes, one byte more fails")
    void customOutputLimitIsExact() {
      Workspace ws = newWorkspace();
      RunOptions limit = RunOptions.builder().outputLimit(1000).timeout(HANG_BOUND).build();
      CommandResult atLimit =
          ws.run(Command.shell("head -c 600 /dev/zero; head -c 400 /dev/zero >&2"), limit);
      assertThat(atLimit.stdout().length + atLimit.stderr().length).isEqualTo(1000);
      assertThatThrownBy(() -> ws.run(Command.shell("head -c 1001 /dev/zero"), limit))
          .isInstanceOf(WorkspaceOutputLimitException.class);
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    @DisplayName(
        "a timeout keeps partial output and kills the whole tree, setsid and daemons included")
    void timeoutKillsTree() {
      Workspace ws = newWorkspace();
      Duration timeout = Duration.ofSeconds(3);
      assertThatThrownBy(() -> ws.run(Command.shell(SPAWN_TREE), RunOptions.withTimeout(timeout)))
          .isInstanceOfSatisfying(
              WorkspaceTimeoutException.class,
              e -> {
                assertThat(e.timeout()).isEqualTo(timeout);
                assertThat(e.partialStdoutText())
                    .as("rule: the timeout carries the partial stdout")
                    .isEqualTo("ready\n");
                assertThat(e.partialStderrText()).isEqualTo("ready-err\n");
              });
      assertThat(aliveProcesses(ws, "s.pid", "d.pid", "c.pid"))
          .as("rule: on timeout every process the command started is killed (setsid, daemonized)")
          .isEmpty();
      assertThat(sh(ws, "echo still-up").stdoutText())
          .as("rule: the workspace stays up after a timeout")
          .isEqualTo("still-up\n");
    }

    @Test
    @DisplayName("cancellation (interrupting the caller) kills the whole tree")
    void cancellationKillsTree() throws Exception {
      Workspace ws = newWorkspace();
      ws.open();
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicReference<Boolean> interruptFlag = new AtomicReference<>();
      Thread caller =
          Thread.ofPlatform()
              .start(
                  () -> {
                    try {
                      ws.run(Command.shell(SPAWN_TREE), RunOptions.defaults());
                    } catch (Throwable t) {
                      thrown.set(t);
                      interruptFlag.set(Thread.currentThread().isInterrupted());
                    }
                  });
      long end = System.nanoTime() + HANG_BOUND.toNanos();
      while (!(ws.exists("s.pid") && ws.exists("d.pid") && ws.exists("c.pid"))) {
        assertThat(System.nanoTime()).as("the tree did not start").isLessThan(end);
        Thread.sleep(10);
      }
      caller.interrupt();
      caller.join(HANG_BOUND);
      assertThat(caller.isAlive()).as("the interrupted run returns").isFalse();
      assertThat(thrown.get()).isInstanceOf(CancellationException.class);
      assertThat(interruptFlag.get()).as("the interrupt flag is set again").isTrue();
      assertThat(aliveProcesses(ws, "s.pid", "d.pid", "c.pid"))
          .as("rule: on cancellation every process the command started is killed")
          .isEmpty();
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    @DisplayName("a background child that keeps the output pipe open does not block the return")
    void backgroundChildDoesNotBlock() throws Exception {
      Workspace ws = newWorkspace();
      // If the run waited for the pipe to close, the timeout would fire instead of a result. The
      // second child writes within the drain grace, then again once the run has returned: it must
      // not lose its reader (SIGPIPE) when it does.
      String script =
          """
          sleep 300 & echo $! > bg.pid
          (sleep 0.3; echo late; while [ ! -e go ]; do sleep 0.02; done; echo after; echo ok > survived) &
          echo early
          """;
      CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(HANG_BOUND));
      assertThat(r.exitCode()).isZero();
      assertThat(r.stdoutText())
          .as("output arriving within the drain grace after exit is kept")
          .isEqualTo("early\nlate\n");
      ws.writeText("go", "");
      long end = System.nanoTime() + HANG_BOUND.toNanos();
      while (!ws.exists("survived")) {
        assertThat(System.nanoTime())
            .as("a background child still writing to stdout after the run returned keeps running")
            .isLessThan(end);
        Thread.sleep(20);
      }
      assertThat(aliveProcesses(ws, "bg.pid"))
          .as("a normal exit leaves background processes running")
          .startsWith("alive bg.pid");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    @DisplayName("background commands: output in pieces, status, TERM then KILL of the whole tree")
    void backgroundCommands() throws Exception {
      Workspace ws = newWorkspace();
      BackgroundCommand polite =
          ws.start(
              Command.shell(
                  "trap 'echo got-term; exit 3' TERM; echo started; while true; do sleep 0.05;"
                      + " done"),
              RunOptions.defaults());
      StringBuilder out = new StringBuilder();
      long end = System.nanoTime() + HANG_BOUND.toNanos();
      while (!out.toString().contains("started")) {
        assertThat(System.nanoTime()).as("the background command did not start").isLessThan(end);
        out.append(polite.takeOutput().stdoutText());
        Thread.sleep(10);
      }
      assertThat(polite.isRunning()).isTrue();
      assertThat(polite.exitCode()).isEmpty();
      polite.stop(HANG_BOUND);
      assertThat(polite.isRunning()).isFalse();
      assertThat(polite.exitCode()).as("stop sends SIGTERM first").hasValue(3);
      assertThat(polite.takeOutput().stdoutText()).isEqualTo("got-term\n");

      BackgroundCommand stubborn =
          ws.start(
              Command.shell(
                  "trap '' TERM; setsid sh -c 'echo $$ > s.pid; exec sleep 300' &"
                      + " while true; do sleep 0.05; done"),
              RunOptions.defaults());
      end = System.nanoTime() + HANG_BOUND.toNanos();
      while (!ws.exists("s.pid")) {
        assertThat(System.nanoTime()).as("the background command did not start").isLessThan(end);
        Thread.sleep(10);
      }
      stubborn.stop(Duration.ofMillis(300));
      assertThat(stubborn.exitCode()).as("what ignores SIGTERM is killed").hasValue(137);
      assertThat(aliveProcesses(ws, "s.pid"))
          .as("killing a background command kills every process it started")
          .isEmpty();

      BackgroundCommand quick =
          ws.start(Command.shell("echo hi; echo err >&2; exit 5"), RunOptions.defaults());
      assertThat(quick.await(HANG_BOUND)).isTrue();
      assertThat(quick.exitCode()).hasValue(5);
      BackgroundCommand.Output output = quick.takeOutput();
      assertThat(output.stdoutText()).isEqualTo("hi\n");
      assertThat(output.stderrText()).isEqualTo("err\n");
      assertThat(quick.takeOutput().stdout()).as("output is taken once").isEmpty();
    }

    @Test
    @DisplayName(
        "background stdin: each write reaches the running command at once, in order; close is EOF")
    void backgroundStdinStreams() throws Exception {
      Workspace ws = newWorkspace();
      BackgroundCommand repl =
          ws.start(
              Command.shell("while read l; do echo \"got $l\"; done; echo eof"),
              RunOptions.builder()
                  .stdin("first\n".getBytes(StandardCharsets.UTF_8))
                  .keepStdinOpen(true)
                  .build());
      StringBuilder out = new StringBuilder();
      awaitStdout(repl, out, "got first\n");
      assertThat(repl.isRunning())
          .as("with keepStdinOpen, the stdin of the options comes first and stdin stays open")
          .isTrue();
      repl.writeStdin("one\n");
      awaitStdout(repl, out, "got first\ngot one\n");
      assertThat(repl.isRunning()).as("a line written is answered while the command runs").isTrue();
      repl.writeStdin("two\n".getBytes(StandardCharsets.UTF_8));
      awaitStdout(repl, out, "got first\ngot one\ngot two\n");
      repl.closeStdin();
      assertThat(repl.await(HANG_BOUND)).as("closeStdin gives the command EOF").isTrue();
      assertThat(repl.exitCode()).hasValue(0);
      out.append(repl.takeOutput().stdoutText());
      assertThat(out.toString()).isEqualTo("got first\ngot one\ngot two\neof\n");
      repl.closeStdin(); // closing twice, or once ended, does nothing
      assertThatThrownBy(() -> repl.writeStdin("late\n"))
          .as("writing after closeStdin is an error that says so")
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("closeStdin() was called");
    }

    @Test
    @DisplayName(
        "background stdin: writing to an ended command, or one started without it, is an error")
    void backgroundStdinErrors() throws Exception {
      Workspace ws = newWorkspace();
      BackgroundCommand once =
          ws.start(
              Command.shell("read l; echo \"got $l\""),
              RunOptions.builder().keepStdinOpen(true).build());
      once.writeStdin("x\n");
      assertThat(once.await(HANG_BOUND)).isTrue();
      assertThat(once.takeOutput().stdoutText()).isEqualTo("got x\n");
      assertThatThrownBy(() -> once.writeStdin("y\n"))
          .as("writing after the command ended is an error that says so")
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("has ended (exit code 0)");

      BackgroundCommand plain = ws.start(Command.shell("cat; echo done"), RunOptions.defaults());
      assertThat(plain.await(HANG_BOUND)).as("without keepStdinOpen, stdin is at EOF").isTrue();
      assertThat(plain.takeOutput().stdoutText()).isEqualTo("done\n");
      assertThatThrownBy(() -> plain.writeStdin("x"))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("keepStdinOpen(true)");
      assertThatThrownBy(plain::closeStdin)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("keepStdinOpen(true)");
      assertThatThrownBy(
              () -> ws.run(Command.shell("cat"), RunOptions.builder().keepStdinOpen(true).build()))
          .as("run() waits for the command: nothing could write to its stdin")
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("keepStdinOpen is for Workspace.start");
    }

    @Test
    @DisplayName("background stdin: a write waits while the command does not read; nothing is lost")
    void backgroundStdinBackPressure() throws Exception {
      Workspace ws = newWorkspace();
      BackgroundCommand late =
          ws.start(
              Command.shell("while [ ! -e go ]; do sleep 0.05; done; wc -c"),
              RunOptions.builder().keepStdinOpen(true).build());
      // far more than every buffer on the way holds (the command's own, a pipe's, a socket's)
      byte[] flood = new byte[32 * BackgroundCommand.MAX_PENDING_STDIN_BYTES];
      CompletableFuture<Throwable> writer = new CompletableFuture<>();
      Thread t =
          Thread.ofVirtual()
              .start(
                  () -> {
                    try {
                      late.writeStdin(flood);
                      writer.complete(null);
                    } catch (Throwable e) {
                      writer.complete(e);
                    }
                  });
      long end = System.nanoTime() + HANG_BOUND.toNanos();
      while (t.getState() != Thread.State.WAITING && !writer.isDone()) {
        assertThat(System.nanoTime()).as("the writer never waited").isLessThan(end);
        Thread.sleep(10);
      }
      assertThat(writer.isDone())
          .as("a command that does not read holds the writer back; nothing piles up in memory")
          .isFalse();
      ws.writeText("go", "");
      assertThat(writer.get(HANG_BOUND.toSeconds(), TimeUnit.SECONDS))
          .as("once the command reads, the write completes")
          .isNull();
      late.closeStdin();
      assertThat(late.await(HANG_BOUND)).isTrue();
      assertThat(late.takeOutput().stdoutText().strip())
          .as("every byte written arrives")
          .isEqualTo(Integer.toString(flood.length));
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    @DisplayName(
        "background stdin: a write waiting for a command that does not read ends with its deadline")
    void backgroundStdinWaitEndsWithTheDeadline() throws Exception {
      assumeTrue(boundsStdinInFlight(), "this backend's stdin crosses unbounded stream buffers");
      Workspace ws = newWorkspace();
      BackgroundCommand deaf =
          ws.start(
              Command.shell("exec sleep 300"),
              RunOptions.builder().keepStdinOpen(true).timeout(Duration.ofSeconds(1)).build());
      // far more than every buffer on the way holds: the write cannot complete
      byte[] flood = new byte[32 * BackgroundCommand.MAX_PENDING_STDIN_BYTES];
      assertThatThrownBy(() -> deaf.writeStdin(flood))
          .as("the deadline ends the command, and with it the write that waits for it")
          .isInstanceOf(IllegalStateException.class)
          // which of the two the writer learns first depends on who notices first: the command's
          // end, or the backend's stdin feeder that stops reading when it ends
          .hasMessageMatching(".*(has ended|no longer reads its stdin).*");
      // the write fails a moment before the end is known
      assertThat(deaf.await(HANG_BOUND)).isTrue();
      assertThat(deaf.failure()).get().isInstanceOf(WorkspaceTimeoutException.class);
    }

    @Test
    @DisplayName("env: workspace env, then command env on top; nothing persists between commands")
    void envLayering() {
      Workspace ws =
          track(
              workspaceOf(
                  newBackendWithEnv(Map.of("LAYER_A", "workspace", "LAYER_B", "workspace"))));
      CommandResult layered =
          ws.run(
              Command.shell("echo \"$LAYER_A $LAYER_B $LAYER_C\""),
              RunOptions.builder().env("LAYER_B", "command").env("LAYER_C", "command").build());
      assertThat(layered.stdoutText()).isEqualTo("workspace command command\n");
      assertThat(sh(ws, "echo \"$LAYER_A $LAYER_B ${LAYER_C-unset}\"").stdoutText())
          .as("a command's env does not outlive the command")
          .isEqualTo("workspace workspace unset\n");
    }

    @Test
    @DisplayName("no host environment reaches commands")
    void noHostEnv() {
      assertThat(System.getenv(HOST_CANARY))
          .as(
              "the build must set %s in the test JVM's environment (see the parent pom)",
              HOST_CANARY)
          .isNotBlank();
      Workspace ws = newWorkspace();
      String env = ws.run(Command.argv("env")).stdoutText();
      assertThat(env)
          .as("rule: nothing from the host environment reaches a workspace")
          .doesNotContain(HOST_CANARY)
          .doesNotContain(System.getenv(HOST_CANARY));
    }
  }

  // ---- files ------------------------------------------------------------------------------------

  @Nested
  @DisplayName("Files")
  class Files_ {

    @Test
    @DisplayName("8 MiB binary round trip, and commands see the same bytes")
    void binaryRoundTrip() throws Exception {
      Workspace ws = newWorkspace();
      byte[] data = randomBytes(8 * 1024 * 1024, 8);
      ws.writeBytes("bin/data.bin", data);
      assertThat(ws.readBytes("bin/data.bin")).isEqualTo(data);
      assertThat(shOk(ws, "sha256sum bin/data.bin")).startsWith(sha256(data));
      ws.write("bin/streamed.bin", new ByteArrayInputStream(data));
      try (InputStream in = ws.openRead("bin/streamed.bin")) {
        assertThat(in.readAllBytes()).isEqualTo(data);
      }
      assertThat(ws.stat("bin/data.bin").size()).isEqualTo(data.length);
    }

    @Test
    @DisplayName("text is UTF-8; commands and files share one environment")
    void textAndSharedEnvironment() {
      Workspace ws = newWorkspace();
      ws.writeText("hello.txt", "héllo wörld ✓\n");
      assertThat(shOk(ws, "cat hello.txt")).isEqualTo("héllo wörld ✓\n");
      shOk(ws, "printf 'from sh' > from-sh.txt");
      assertThat(ws.readText("from-sh.txt")).isEqualTo("from sh");
      assertThat(ws.readText(ws.workingDirectory() + "/from-sh.txt")).isEqualTo("from sh");
    }

    @Test
    @DisplayName("write creates parent directories")
    void writeCreatesParents() {
      Workspace ws = newWorkspace();
      ws.writeText("a/b/c/d.txt", "deep");
      assertThat(ws.stat("a/b/c").isDirectory()).isTrue();
      assertThat(ws.readText("a/b/c/d.txt")).isEqualTo("deep");
    }

    @Test
    @DisplayName("write goes through a symlink to its target, also a dangling one")
    void writeThroughSymlink() {
      Workspace ws = newWorkspace();
      shOk(
          ws,
          "mkdir -p real && echo old > real/target.txt && ln -s real/target.txt link && ln -s new.txt dangling");
      ws.writeText("link", "new content");
      assertThat(ws.readText("real/target.txt"))
          .as("rule: write goes through symlinks")
          .isEqualTo("new content");
      assertThat(entry(ws, ".", "link").type())
          .as("the link stays a link")
          .isEqualTo(FileType.SYMLINK);
      ws.writeText("dangling", "created");
      assertThat(ws.readText("new.txt")).isEqualTo("created");
      assertThat(entry(ws, ".", "dangling").type()).isEqualTo(FileType.SYMLINK);
    }

    @Test
    @DisplayName("write keeps an existing file's mode and gives a new file 0666 less the umask")
    void writeKeepsMode() {
      Workspace ws = newWorkspace();
      ws.writeText("run.sh", "#!/bin/sh\necho one\n");
      int umask = Integer.parseInt(shOk(ws, "umask").trim(), 8);
      assertThat(ws.stat("run.sh").permissions()).isEqualTo(0666 & ~umask);
      shOk(ws, "chmod 750 run.sh");
      ws.writeText("run.sh", "#!/bin/sh\necho two\n");
      assertThat(ws.stat("run.sh").permissions()).isEqualTo(0750);
      assertThat(shOk(ws, "./run.sh")).isEqualTo("two\n");
    }

    @Test
    @DisplayName("reading a FIFO fails at once instead of waiting")
    void fifoReadFailsFast() throws Exception {
      Workspace ws = newWorkspace();
      shOk(ws, "mkfifo pipe");
      try (ExecutorService pool = threads()) {
        Future<byte[]> read = pool.submit(() -> ws.readBytes("pipe"));
        try {
          within(HANG_BOUND, read, "reading a FIFO");
          fail("rule: reading a FIFO fails; it returned instead");
        } catch (ExecutionException e) {
          assertThat(e.getCause())
              .as("rule: reading a FIFO fails at once")
              .isInstanceOf(WorkspaceFileException.class)
              .hasMessageContaining("pipe");
        } finally {
          if (!read.isDone()) {
            sh(ws, "echo unblock > pipe"); // release a reader stuck in open(2)
          }
        }
      }
    }

    @Test
    @DisplayName("listing is sorted, typed, does not follow symlinks, and survives symlink loops")
    void listing() {
      Workspace ws = newWorkspace();
      shOk(
          ws,
          "mkdir d && printf 12345 > d/file.txt && mkdir d/sub && ln -s file.txt d/link"
              + " && ln -s loop2 d/loop1 && ln -s loop1 d/loop2 && ln -s . d/self");
      List<DirectoryEntry> entries = ws.list("d");
      assertThat(entries)
          .extracting(DirectoryEntry::name)
          .containsExactly("file.txt", "link", "loop1", "loop2", "self", "sub");
      assertThat(entries)
          .extracting(DirectoryEntry::type)
          .containsExactly(
              FileType.FILE,
              FileType.SYMLINK,
              FileType.SYMLINK,
              FileType.SYMLINK,
              FileType.SYMLINK,
              FileType.DIRECTORY);
      assertThat(entries.getFirst().size()).isEqualTo(5);
      assertThatThrownBy(() -> ws.readBytes("d/loop1"))
          .as("a symlink loop is an error, not a hang")
          .isInstanceOf(WorkspaceFileException.class);
    }

    @Test
    @DisplayName("odd names survive: spaces, newlines, leading dashes, Unicode")
    void oddNames() {
      Workspace ws = newWorkspace();
      List<String> names = List.of("a b.txt", "-rf", "new\nline", "ünïcødé ✓.txt", "'quote\"");
      for (String name : names) {
        ws.writeText("odd/" + name, name);
      }
      assertThat(ws.list("odd"))
          .extracting(DirectoryEntry::name)
          .containsExactlyInAnyOrderElementsOf(names);
      for (String name : names) {
        assertThat(ws.readText("odd/" + name)).isEqualTo(name);
      }
      assertThat(shOk(ws, "cat 'odd/ünïcødé ✓.txt'")).isEqualTo("ünïcødé ✓.txt");
    }

    @Test
    @DisplayName(
        "stat follows symlinks and reports type, size and mode; exists is false for a dangling link")
    void statAndExists() {
      Workspace ws = newWorkspace();
      shOk(
          ws,
          "printf abc > f && chmod 640 f && ln -s f link && ln -s missing dangling && mkdir dir");
      assertThat(ws.stat("link").type()).isEqualTo(FileType.FILE);
      assertThat(ws.stat("link").size()).isEqualTo(3);
      assertThat(ws.stat("f").permissions()).isEqualTo(0640);
      assertThat(ws.stat("dir").type()).isEqualTo(FileType.DIRECTORY);
      assertThat(ws.stat("f").modified()).isAfter(java.time.Instant.parse("2020-01-01T00:00:00Z"));
      assertThat(ws.exists("f")).isTrue();
      assertThat(ws.exists("dangling")).isFalse();
      assertThat(ws.exists("missing")).isFalse();
      assertThat(ws.exists("f/below")).isFalse();
    }

    @Test
    @DisplayName("createDirectories is mkdir -p")
    void createDirectories() {
      Workspace ws = newWorkspace();
      ws.createDirectories("x/y/z");
      ws.createDirectories("x/y/z");
      assertThat(ws.stat("x/y/z").isDirectory()).isTrue();
    }

    @Test
    @DisplayName("rename replaces a file and moves directories")
    void rename() {
      Workspace ws = newWorkspace();
      ws.writeText("a.txt", "a");
      ws.writeText("b.txt", "b");
      ws.rename("a.txt", "b.txt");
      assertThat(ws.readText("b.txt")).isEqualTo("a");
      assertThat(ws.exists("a.txt")).isFalse();
      ws.writeText("dir/inner.txt", "in");
      ws.rename("dir", "moved");
      assertThat(ws.readText("moved/inner.txt")).isEqualTo("in");
    }

    @Test
    @DisplayName(
        "remove: files, links (not targets), empty dirs, and recursive without following links")
    void remove() {
      Workspace ws = newWorkspace();
      shOk(
          ws,
          "mkdir -p keep tree/sub && echo k > keep/k.txt && echo t > tree/sub/t.txt && ln -s ../keep tree/link");
      ws.remove("tree", true);
      assertThat(ws.exists("tree")).isFalse();
      assertThat(ws.readText("keep/k.txt")).as("recursion never follows symlinks").isEqualTo("k\n");
      shOk(ws, "ln -s keep/k.txt klink && mkdir empty");
      ws.remove("klink");
      assertThat(ws.exists("keep/k.txt")).isTrue();
      ws.remove("empty");
      ws.remove("keep/k.txt");
      assertThat(ws.list("keep")).isEmpty();
    }

    @Test
    @DisplayName("remove and rename refuse the working directory and its ancestors")
    void removeRefusesWorkingDirectory() {
      Workspace ws = newWorkspace();
      String wd = ws.workingDirectory();
      ws.writeText("precious.txt", "keep me");
      for (String path :
          List.of(".", wd, "..", "/", wd + "/../" + wd.substring(wd.lastIndexOf('/') + 1))) {
        assertThatThrownBy(() -> ws.remove(path, true))
            .as("rule: remove refuses the working directory and its ancestors (%s)", path)
            .isInstanceOf(WorkspaceAccessDeniedException.class);
      }
      assertThatThrownBy(() -> ws.rename(".", "elsewhere"))
          .isInstanceOf(WorkspaceAccessDeniedException.class);
      assertThat(ws.readText("precious.txt")).isEqualTo("keep me");
      shOk(ws, "ln -s \"$PWD\" wdlink");
      ws.remove("wdlink");
      assertThat(ws.exists("wdlink")).isFalse();
      assertThat(ws.readText("precious.txt"))
          .as("removing a link to the working directory removes the link")
          .isEqualTo("keep me");
    }

    @Test
    @DisplayName(
        "working directory is absolute and canonical; resolve and realpath agree with the shell")
    void pathsResolve() {
      Workspace ws = newWorkspace();
      String wd = ws.workingDirectory();
      assertThat(wd).startsWith("/");
      assertThat(shOk(ws, "pwd -P").trim()).isEqualTo(wd);
      assertThat(ws.realpath(".")).isEqualTo(wd);
      assertThat(ws.resolve("a/./b//c/")).isEqualTo((wd.equals("/") ? "" : wd) + "/a/b/c");
      assertThat(ws.resolve("/etc/./hosts")).isEqualTo("/etc/hosts");
      shOk(ws, "mkdir real && ln -s real alias");
      assertThat(ws.realpath("alias/missing/x")).isEqualTo(wd + "/real/missing/x");
      assertThat(ws.realpath("alias/..")).isEqualTo(wd);
    }

    @Test
    @DisplayName("each failure has its own error type")
    void distinctErrors() {
      Workspace ws = newWorkspace();
      ws.writeText("file.txt", "f");
      ws.writeText("full/inner.txt", "i");
      ws.createDirectories("dir");
      ws.createDirectories("empty");
      assertThatThrownBy(() -> ws.readBytes("missing.txt"))
          .isInstanceOf(WorkspaceNoSuchFileException.class);
      assertThatThrownBy(() -> ws.stat("missing.txt"))
          .isInstanceOf(WorkspaceNoSuchFileException.class);
      assertThatThrownBy(() -> ws.list("missing")).isInstanceOf(WorkspaceNoSuchFileException.class);
      assertThatThrownBy(() -> ws.remove("missing.txt"))
          .isInstanceOf(WorkspaceNoSuchFileException.class);
      assertThatThrownBy(() -> ws.rename("missing.txt", "x"))
          .isInstanceOf(WorkspaceNoSuchFileException.class);
      assertThatThrownBy(() -> ws.readBytes("dir"))
          .isInstanceOf(WorkspaceIsDirectoryException.class);
      assertThatThrownBy(() -> ws.writeText("dir", "x"))
          .isInstanceOf(WorkspaceIsDirectoryException.class);
      assertThatThrownBy(() -> ws.rename("file.txt", "full"))
          .isInstanceOf(WorkspaceIsDirectoryException.class);
      assertThatThrownBy(() -> ws.readBytes("file.txt/below"))
          .isInstanceOf(WorkspaceNotDirectoryException.class);
      assertThatThrownBy(() -> ws.writeText("file.txt/below", "x"))
          .isInstanceOf(WorkspaceNotDirectoryException.class);
      assertThatThrownBy(() -> ws.list("file.txt"))
          .isInstanceOf(WorkspaceNotDirectoryException.class);
      assertThatThrownBy(() -> ws.rename("dir", "file.txt"))
          .isInstanceOf(WorkspaceNotDirectoryException.class);
      assertThatThrownBy(() -> ws.createDirectories("file.txt"))
          .isInstanceOf(WorkspaceFileAlreadyExistsException.class);
      assertThatThrownBy(() -> ws.remove("full"))
          .isInstanceOf(WorkspaceDirectoryNotEmptyException.class);
      assertThatThrownBy(() -> ws.rename("empty", "full"))
          .isInstanceOf(WorkspaceDirectoryNotEmptyException.class);
      assertThatThrownBy(() -> ws.readBytes("missing.txt"))
          .as("errors name the path")
          .hasMessageContaining("missing.txt");
      assertThat(ws.readText("full/inner.txt"))
          .as("failed operations change nothing")
          .isEqualTo("i");
      assertThat(ws.readText("file.txt")).isEqualTo("f");
    }

    @Test
    @DisplayName("permission checks are those of the workspace user")
    void permissions() {
      Workspace ws = newWorkspace();
      ws.writeText("secret.txt", "secret");
      ws.writeText("locked.txt", "locked");
      boolean root = shOk(ws, "id -u").trim().equals("0");
      shOk(ws, "chmod 000 secret.txt");
      if (root) {
        // root passes every mode check; an immutable file is refused even to root
        shOk(ws, "chattr +i locked.txt");
        cleanups.add(() -> sh(ws, "chattr -i locked.txt"));
      } else {
        shOk(ws, "chmod 444 locked.txt");
      }
      CommandResult cat = sh(ws, "cat secret.txt");
      if (cat.exitCode() == 0) {
        assertThat(ws.readText("secret.txt"))
            .as("the files API may read what cat may")
            .isEqualTo("secret");
      } else {
        assertThat(cat.stderrText()).contains("Permission denied");
        assertThatThrownBy(() -> ws.readBytes("secret.txt"))
            .as("rule: reading what the workspace user may not read is permission-denied")
            .isInstanceOf(WorkspaceAccessDeniedException.class);
      }
      assertThat(sh(ws, "echo x > locked.txt").exitCode())
          .as("the shell may not write it")
          .isNotZero();
      assertThatThrownBy(() -> ws.writeText("locked.txt", "overwritten"))
          .as("rule: writing what the workspace user may not write is permission-denied")
          .isInstanceOf(WorkspaceAccessDeniedException.class);
      assertThat(ws.readText("locked.txt")).isEqualTo("locked");
    }

    @Test
    @DisplayName("a read-only view refuses every write and every command, and still reads")
    void readOnlyView() {
      Workspace ws = newWorkspace();
      ws.writeText("a.txt", "a");
      Workspace ro = ws.readOnly();
      assertThat(ro.readText("a.txt")).isEqualTo("a");
      assertThat(ro.list(".")).extracting(DirectoryEntry::name).contains("a.txt");
      assertThatThrownBy(() -> ro.writeText("a.txt", "b"))
          .isInstanceOf(WorkspaceReadOnlyException.class);
      assertThatThrownBy(() -> ro.write("b.txt", new ByteArrayInputStream(new byte[0])))
          .isInstanceOf(WorkspaceReadOnlyException.class);
      assertThatThrownBy(() -> ro.remove("a.txt")).isInstanceOf(WorkspaceReadOnlyException.class);
      assertThatThrownBy(() -> ro.rename("a.txt", "c.txt"))
          .isInstanceOf(WorkspaceReadOnlyException.class);
      assertThatThrownBy(() -> ro.createDirectories("d"))
          .isInstanceOf(WorkspaceReadOnlyException.class);
      assertThatThrownBy(() -> ro.run(Command.argv("true")))
          .isInstanceOf(WorkspaceReadOnlyException.class);
      assertThat(ws.readText("a.txt")).isEqualTo("a");
    }
  }

  private static DirectoryEntry entry(Workspace ws, String dir, String name) {
    return ws.list(dir).stream()
        .filter(e -> e.name().equals(name))
        .findFirst()
        .orElseThrow(() -> new AssertionError(name + " not listed in " + dir));
  }

  // ---- isolation (isolating backends only) ----------------------------------------------------

  @Nested
  @DisplayName("Isolation")
  class Isolation {

    @Test
    @DisplayName("no path, .. or symlink reaches a host file outside the workspace")
    void noPathEscapes() throws IOException {
      assumeTrue(isolatesFromHost(), "this backend isolates nothing from the host");
      String secret = "host-secret-" + UUID.randomUUID();
      Path hostDir = Files.createTempDirectory("sandbox4j-conformance-");
      Path marker = hostDir.resolve("marker.txt");
      Files.writeString(marker, secret);
      try {
        Workspace ws = newWorkspace();
        String abs = marker.toString();
        shOk(
            ws,
            "ln -s '" + abs + "' escape-link; ln -s / rootlink; ln -s '" + hostDir + "' dirlink");
        List<String> attempts =
            List.of(
                abs,
                "../../../../../../../.." + abs,
                "escape-link",
                "rootlink" + abs,
                "dirlink/marker.txt");
        for (String path : attempts) {
          try {
            assertThat(ws.readText(path))
                .as("rule: no path reaches a host file (%s)", path)
                .isNotEqualTo(secret);
          } catch (WorkspaceFileException expected) {
            // not found inside the workspace: fine
          }
          try {
            ws.writeText(path, "overwritten");
          } catch (WorkspaceFileException expected) {
            // refused: fine
          }
          assertThat(Files.readString(marker))
              .as("rule: no write reaches a host file (%s)", path)
              .isEqualTo(secret);
        }
        assertThat(sh(ws, "cat '" + abs + "' escape-link dirlink/marker.txt").stdoutText())
            .doesNotContain(secret);
      } finally {
        Files.deleteIfExists(marker);
        Files.deleteIfExists(hostDir);
      }
    }

    @Test
    @DisplayName("commands and file operations see one file system, also under /tmp")
    void oneFileSystemOutsideTheWorkingDirectory() {
      assumeTrue(isolatesFromHost(), "absolute paths of this backend are the host's own");
      Workspace ws = newWorkspace();
      // /tmp is where agents put scratch files; a runtime that mounts a file system of its own
      // there (gVisor does, unless told otherwise) would split it in two.
      for (String dir : List.of("/tmp", "/var/tmp", ws.workingDirectory())) {
        String base = dir + "/conformance-" + UUID.randomUUID();
        ws.writeText(base + "/written.txt", "from the file API");
        assertThat(shOk(ws, "cat '" + base + "/written.txt'"))
            .as("rule: a command sees what the file API wrote (%s)", dir)
            .isEqualTo("from the file API");
        shOk(ws, "printf 'from a command' > '" + base + "/run.txt'");
        assertThat(ws.readText(base + "/run.txt"))
            .as("rule: the file API sees what a command wrote (%s)", dir)
            .isEqualTo("from a command");
      }
    }

    @Test
    @DisplayName("the workspace has its own home and environment, not the host's")
    void ownHome() {
      assumeTrue(isolatesFromHost(), "this backend isolates nothing from the host");
      Workspace ws = newWorkspace();
      String home = shOk(ws, "printf %s \"$HOME\"");
      assertThat(home).isNotEmpty().isNotEqualTo(System.getenv("HOME"));
      Map<String, String> host = System.getenv();
      for (String line : ws.run(Command.argv("env")).stdoutText().split("\n")) {
        int eq = line.indexOf('=');
        if (eq > 0
            && !Set.of("PATH", "LANG", "TERM", "PWD", "SHLVL", "_")
                .contains(line.substring(0, eq))) {
          String name = line.substring(0, eq);
          assertThat(line.substring(eq + 1))
              .as("rule: nothing from the host environment reaches a workspace (%s)", name)
              .isNotEqualTo(host.get(name));
        }
      }
    }
  }
}
