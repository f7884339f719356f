package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.ResourceAccessMode;
import org.junit.jupiter.api.parallel.ResourceLock;

/**
 * Issue 5, timers: each timer, with short values, does what it says, enforced by the home's
 * supervisor process; and they survive killing the managing JVM and the supervisor. Works in
 * private homes seeded with the shared default image, so that it can kill a home's supervisor
 * without touching anyone else's.
 *
 * <p>The tests mostly wait for timers and each watches only its own sandboxes, so they run at the
 * same time. The one that kills the supervisor has a home of its own ({@link #restartHome}), and
 * runs alone ({@link #ALONE}): its scenario expects its 8 s idle timer and its suspend to be done
 * well before its 40 s lifetime, which the others' CPU-bound sandbox could delay.
 */
@Execution(ExecutionMode.CONCURRENT)
class TimersTest {
  /** Taken for writing by the supervisor-killing test, for reading by the others. */
  private static final String ALONE = "TimersTest.restarts";

  @TempDir static Path temp;

  private static Path home;
  private static LocalSandbox sandboxes;

  /** The home of {@link #timersSurviveKillingTheManagingJvmAndTheSupervisor} alone. */
  private static Path restartHome;

  private static LocalSandbox restartSandboxes;

  @BeforeAll
  static void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    sandboxes = builder().build();
    restartHome = Files.createDirectories(temp.resolve("restarts").resolve("home"));
    Files.setPosixFilePermissions(
        restartHome.getParent(),
        java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
    TestImages.seedDefault(restartHome);
    restartSandboxes = LocalSandbox.builder().home(restartHome).progress(line -> {}).build();
  }

  @AfterAll
  static void tearDown() throws IOException {
    try {
      TestImages.destroyAllAndDelete(restartSandboxes, restartHome);
    } finally {
      TestImages.destroyAllAndDelete(sandboxes, home);
    }
  }

  private static LocalSandbox.Builder builder() {
    return LocalSandbox.builder().home(home).progress(line -> {});
  }

  private static String state(WorkspaceRef ref) {
    return sandboxes.list().stream()
        .filter(i -> i.ref().equals(ref))
        .map(SandboxInfo::state)
        .findFirst()
        .orElse("gone");
  }

  private static void await(String what, Duration limit, BooleanSupplier condition)
      throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > end) {
        throw new AssertionError("not within " + limit + ": " + what);
      }
      Thread.sleep(200);
    }
  }

  private static String sh(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.succeeded()).as(script + " gave " + r).isTrue();
    return r.stdoutText();
  }

  private static List<ProcessHandle> supervisors() {
    return TestImages.supervisors(restartHome);
  }

  // ---- each timer -------------------------------------------------------------------------

  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ)
  void sandboxTimeoutEndsTheSandboxAtItsMinimumOfTenSeconds() throws Exception {
    Instant start = Instant.now();
    LocalSandbox provider = builder().sandboxTimeout(Duration.ofSeconds(10)).build();
    Workspace ws = Workspace.of(provider.newBackend());
    WorkspaceRef ref = ws.open();
    assertThat(
            sandboxes.list().stream()
                .filter(i -> i.ref().equals(ref))
                .findFirst()
                .orElseThrow()
                .timers()
                .sandboxTimeout())
        .isEqualTo(Duration.ofSeconds(10));
    assertThat(sh(ws, "echo hi")).isEqualTo("hi\n");
    await("the sandbox ends", Duration.ofSeconds(40), () -> state(ref).equals("gone"));
    assertThat(Duration.between(start, Instant.now()))
        .isGreaterThanOrEqualTo(Duration.ofSeconds(10));
    assertThatThrownBy(() -> ws.run(Command.shell("true")))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining(
            "sandbox local:" + ref.id() + " ended: its sandboxTimeout of 10s passed");
    assertThatThrownBy(() -> Workspace.of(sandboxes.backend(ref).orElseThrow()).open())
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("ended: its sandboxTimeout of 10s passed");
  }

  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ)
  void sandboxTimeoutIsBounded() {
    assertThatThrownBy(() -> builder().sandboxTimeout(Duration.ofSeconds(9)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sandboxTimeout must be from 10 seconds to 24 hours");
    assertThatThrownBy(() -> builder().sandboxTimeout(Duration.ofHours(24).plusSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder().idleTimeout(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ)
  void idleTimeoutEndsAnIdleSandboxButNotOneRunningACommand() throws Exception {
    LocalSandbox provider = builder().idleTimeout(Duration.ofSeconds(3)).build();
    Workspace idle = Workspace.of(provider.newBackend());
    WorkspaceRef idleRef = idle.open();
    Workspace busy = Workspace.of(provider.newBackend());
    WorkspaceRef busyRef = busy.open();
    // The command runs until the test releases it: however late the supervisor ends the idle
    // sandbox, the busy one is still running its command at that moment.
    CompletableFuture<CommandResult> command =
        CompletableFuture.supplyAsync(
            () ->
                busy.run(
                    Command.shell("while [ ! -e /tmp/release ]; do sleep 0.2; done; echo done")));
    await("the idle sandbox ends", Duration.ofSeconds(30), () -> state(idleRef).equals("gone"));
    assertThat(state(busyRef))
        .as("the sandbox running a command; supervisor log:\n%s", supervisorLog())
        .isEqualTo("running");
    assertThat(command).as("the busy command").isNotDone();
    sh(busy, "touch /tmp/release");
    CommandResult r = command.get();
    assertThat(r.stdoutText()).isEqualTo("done\n");
    assertThatThrownBy(() -> idle.run(Command.shell("true")))
        .hasMessageContaining("ended: it was idle for its idleTimeout of 3s");
    await("the other ends once idle", Duration.ofSeconds(30), () -> state(busyRef).equals("gone"));
  }

  private static String supervisorLog() {
    try {
      return Files.readString(home.resolve(Supervisor.LOG_FILE));
    } catch (IOException e) {
      return "(none: " + e + ")";
    }
  }

  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ)
  void autoSuspendSuspendsAnIdleSandboxAndAnExecWakesIt() throws Exception {
    LocalSandbox provider = builder().autoSuspendTimeout(Duration.ofSeconds(3)).build();
    Workspace ws = Workspace.of(provider.newBackend());
    WorkspaceRef ref = ws.open();
    try {
      // the counter is renamed into place, so that a read never sees it half written (empty)
      sh(
          ws,
          "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /home/sandbox/c.new;"
              + " mv /home/sandbox/c.new /home/sandbox/c; sleep 0.2; done'"
              + " >/dev/null 2>&1 &");
      await("suspended", Duration.ofSeconds(30), () -> state(ref).equals("suspended"));
      // The record says suspended before the freezer has stopped every process (the record goes
      // first, so that a crash mid-freeze is recovered as a suspend): the counter stands still
      // once the freeze is done.
      Cgroups cgroups = sandboxes.engine().cgroups();
      await("frozen", Duration.ofSeconds(30), () -> Freezer.isFrozen(cgroups, ref.id()));
      Path counter =
          SandboxDisk.upper(home.resolve("sandboxes").resolve(ref.id())).resolve("home/sandbox/c");
      String frozen = Files.readString(counter);
      Thread.sleep(1500);
      assertThat(Files.readString(counter)).as("the counter while suspended").isEqualTo(frozen);
      long before = Long.parseLong(sh(ws, "cat /home/sandbox/c").strip());
      assertThat(state(ref)).isEqualTo("running");
      Thread.sleep(1000);
      assertThat(Long.parseLong(sh(ws, "cat /home/sandbox/c").strip())).isGreaterThan(before);
    } finally {
      sandboxes.destroy(ref);
    }
  }

  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ)
  void aCpuBoundSandboxIsNotSuspended() throws Exception {
    LocalSandbox provider = builder().autoSuspendTimeout(Duration.ofSeconds(3)).build();
    Workspace ws = Workspace.of(provider.newBackend());
    WorkspaceRef ref = ws.open();
    try {
      sh(ws, "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &");
      Thread.sleep(9000);
      assertThat(state(ref))
          .as("a sandbox busy with CPU after 3 × its timeout")
          .isEqualTo("running");
    } finally {
      sandboxes.destroy(ref);
    }
  }

  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ)
  void deleteAfterEndsTheSandboxAtThatTime() throws Exception {
    Instant at = Instant.now().plusSeconds(6);
    LocalSandbox provider = builder().deleteAfter(at).build();
    Workspace ws = Workspace.of(provider.newBackend());
    WorkspaceRef ref = ws.open();
    await("the sandbox ends", Duration.ofSeconds(30), () -> state(ref).equals("gone"));
    assertThat(Instant.now()).isAfterOrEqualTo(at);
    assertThatThrownBy(() -> ws.run(Command.shell("true")))
        .hasMessageContaining("ended: its deleteAfter time " + at + " passed");
  }

  // ---- restarts ---------------------------------------------------------------------------

  /**
   * A child JVM creates a sandbox per timer and is killed with SIGKILL, and so is the supervisor it
   * started. With no JVM of the user running, a supervisor started on its own (as a boot script
   * would) enforces every timer; killed again halfway, the next use of the engine starts a new one
   * that finishes the job.
   */
  @Test
  @ResourceLock(value = ALONE, mode = ResourceAccessMode.READ_WRITE)
  void timersSurviveKillingTheManagingJvmAndTheSupervisor() throws Exception {
    List<String> argv =
        List.of(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "--enable-native-access=ALL-UNNAMED",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-cp",
            System.getProperty("java.class.path"),
            TimersChild.class.getName(),
            restartHome.toString());
    Process child =
        new ProcessBuilder(argv)
            .redirectError(temp.resolve("child.stderr").toFile())
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .start();
    Map<String, String> ids = new HashMap<>();
    try (BufferedReader out =
        new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line; (line = out.readLine()) != null && !line.equals("DONE"); ) {
        String[] words = line.split(" ");
        ids.put(words[1], WorkspaceRef.parse(words[2]).id());
      }
    }
    assertThat(ids).containsOnlyKeys("lifetime", "idle", "suspend", "delete");
    await("the child's supervisor", Duration.ofSeconds(20), () -> !supervisors().isEmpty());
    child.destroyForcibly().waitFor();
    killSupervisors();

    // No JVM of the user from here: the test reads files only, and starts a supervisor itself.
    Supervisor.spawn(restartHome, OciRuntime.defaultCrun().orElseThrow());
    await("idle sandbox ended", Duration.ofSeconds(40), () -> !exists(ids.get("idle")));
    assertThat(tombstone(ids.get("idle"))).contains("idle for its idleTimeout of 8s");
    await(
        "sandbox suspended",
        Duration.ofSeconds(40),
        () -> status(ids.get("suspend")).equals("SUSPENDED"));
    assertThat(exists(ids.get("lifetime"))).as("lifetime not over yet").isTrue();

    killSupervisors();
    restartSandboxes.list(); // any use of the engine starts the supervisor again
    await("a new supervisor", Duration.ofSeconds(20), () -> !supervisors().isEmpty());
    await("lifetime ended", Duration.ofSeconds(60), () -> !exists(ids.get("lifetime")));
    assertThat(tombstone(ids.get("lifetime"))).contains("its sandboxTimeout of 40s passed");
    await("deleteAfter passed", Duration.ofSeconds(60), () -> !exists(ids.get("delete")));
    assertThat(tombstone(ids.get("delete"))).contains("deleteAfter time");
    assertThat(status(ids.get("suspend"))).isEqualTo("SUSPENDED");
  }

  private static void killSupervisors() throws InterruptedException {
    for (ProcessHandle p : supervisors()) {
      p.destroyForcibly();
      p.onExit().join();
    }
    assertThat(supervisors()).isEmpty();
  }

  private static boolean exists(String id) {
    return Files.exists(restartHome.resolve("sandboxes").resolve(id).resolve("state.json"));
  }

  private static String status(String id) {
    try {
      return SandboxRecord.read(restartHome.resolve("sandboxes").resolve(id).resolve("state.json"))
          .status()
          .name();
    } catch (IOException e) {
      return "gone";
    }
  }

  private static String tombstone(String id) throws IOException {
    return Files.readString(restartHome.resolve("ended").resolve(id + ".json"));
  }
}
