package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.linux.HostLimits;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The parent cgroup of all sandboxes of a state directory caps what they use together, whatever
 * each sandbox's own limits say: a fork bomb or a memory bomb in one sandbox, or in several at
 * once, meets the parent's limit, the kernel acts inside the sandboxes, and the other sandboxes and
 * the host carry on. The home is private, so its parent cgroup is its own, with small limits (set
 * through the builder) that the sandboxes' own limits add up to more than.
 */
class SandboxesLimitsTest {
  private static final long PARENT_PIDS = 300;
  private static final long PARENT_MEMORY = 768L << 20;
  private static final Duration BOMB_TIMEOUT = Duration.ofSeconds(8);

  @TempDir static Path temp;

  private static Path home;
  private static LocalSandbox sandboxes;
  private static final ExecutorService THREADS = Executors.newVirtualThreadPerTaskExecutor();

  private final List<WorkspaceRef> own = new ArrayList<>();

  @BeforeAll
  static void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    sandboxes = builder().build();
  }

  @AfterEach
  void destroyOwn() {
    for (WorkspaceRef ref : own) {
      sandboxes.destroy(ref);
    }
    own.clear();
  }

  @AfterAll
  static void tearDown() throws IOException {
    if (sandboxes != null) {
      for (SandboxInfo s : sandboxes.list()) {
        sandboxes.destroy(s.ref());
      }
    }
    supervisors().forEach(ProcessHandle::destroyForcibly); // started for this home: ours
    if (home != null) {
      Trees.delete(home);
    }
  }

  private static LocalSandbox.Builder builder() {
    return LocalSandbox.builder()
        .home(home)
        .progress(line -> {})
        .sandboxesLimits(
            new HostLimits.Sandboxes(PARENT_MEMORY, PARENT_PIDS, HostLimits.SANDBOXES_CPU_SHARES));
  }

  private Workspace create(LocalSandbox.Builder b) {
    Workspace ws = Workspace.of(b.build().newBackend());
    own.add(ws.open());
    return ws;
  }

  /** The parent cgroup's file in the hierarchy of {@code controller} (v1), else in cgroup v2. */
  private static Path parentFile(String controller, String file) {
    Path v1 = Path.of("/sys/fs/cgroup", controller, Cgroups.parentFor(home));
    return (Files.isDirectory(v1) ? v1 : Path.of("/sys/fs/cgroup", Cgroups.parentFor(home)))
        .resolve(file);
  }

  private static Path sandboxFile(String controller, WorkspaceRef ref, String file) {
    return parentFile(controller, ref.id()).resolve(file);
  }

  private static long read(Path file) throws IOException {
    return Long.parseLong(Files.readString(file).strip());
  }

  private static String ok(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(Duration.ofSeconds(60)));
    assertThat(r.exitCode()).as("%s: %s", script, r.stderrText()).isZero();
    return r.stdoutText();
  }

  private static CompletableFuture<Object> forkBomb(Workspace ws) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            // exec: once the bomb holds every pid, a fork for sleep would fail
            return ws.run(
                Command.shell("bash -c ':(){ :|:& };:' 2>/dev/null; exec sleep 120"),
                RunOptions.withTimeout(BOMB_TIMEOUT));
          } catch (WorkspaceException e) {
            return e; // the timeout, which kills the bomb
          }
        },
        THREADS);
  }

  @Test
  void forkBombsInTwoSandboxesMeetTheParentsPidsLimitWhateverTheirOwnLimitsSay() throws Exception {
    // 250 each: together they may want 500, more than the parent's 300
    Workspace a = create(builder().pids(250));
    Workspace b = create(builder().pids(250));
    WorkspaceRef refA = a.ref().orElseThrow();
    WorkspaceRef refB = b.ref().orElseThrow();

    CompletableFuture<Object> bombA = forkBomb(a);
    CompletableFuture<Object> bombB = forkBomb(b);
    long peakParent = 0;
    long peakA = 0;
    long peakB = 0;
    // sample until both bombs have ended (their timeout kills them; a bomb fills its pids in well
    // under a second)
    while (!(bombA.isDone() && bombB.isDone())) {
      peakParent = Math.max(peakParent, read(parentFile("pids", "pids.current")));
      try {
        peakA = Math.max(peakA, read(sandboxFile("pids", refA, "pids.current")));
        peakB = Math.max(peakB, read(sandboxFile("pids", refB, "pids.current")));
      } catch (IOException | NumberFormatException gone) {
        // a cgroup file read while the kernel updates it; the next sample counts
      }
      Thread.sleep(50);
    }
    assertThat(peakA)
        .as("pids: sandbox A's bomb never exceeds A's own limit of 250")
        .isLessThanOrEqualTo(250);
    assertThat(peakB)
        .as("pids: sandbox B's bomb never exceeds B's own limit of 250")
        .isLessThanOrEqualTo(250);
    assertThat(peakParent)
        .as(
            "pids: both bombs together reach the parent's limit of %d (more than one sandbox may"
                + " have) and never exceed it, although the sandboxes' own limits add up to 500",
            PARENT_PIDS)
        .isGreaterThan(250)
        .isLessThanOrEqualTo(PARENT_PIDS);
    Process hostTrue = new ProcessBuilder("true").start();
    assertThat(hostTrue.waitFor(30, TimeUnit.SECONDS) && hostTrue.exitValue() == 0)
        .as("the host still starts processes after the bombs")
        .isTrue();
    assertThat(ok(a, "echo alive").strip())
        .as("sandbox A runs commands after its bomb was killed")
        .isEqualTo("alive");
    assertThat(ok(b, "echo alive").strip())
        .as("sandbox B runs commands after its bomb was killed")
        .isEqualTo("alive");
    assertThat(read(parentFile("pids", "pids.max")))
        .as("the parent cgroup of the home's sandboxes has the pids limit of all of them")
        .isEqualTo(PARENT_PIDS);
  }

  @Test
  void aMemoryBombUnderItsOwnLimitButOverTheParentsIsKilledInsideAndTheOtherSandboxCarriesOn()
      throws Exception {
    // each may use 2 GiB, the parent only 768 MiB for all of them
    Workspace bomber = create(builder().memory(2L << 30));
    Workspace other = create(builder().memory(2L << 30));
    WorkspaceRef bomberRef = bomber.ref().orElseThrow();

    CommandResult hog =
        bomber.run(
            Command.shell(
                "python3 -c 'b = bytearray(b\"\\x01\") * (1 << 30); print(\"ALLOCATED\")'"),
            RunOptions.withTimeout(Duration.ofSeconds(120)));
    assertThat(hog.stdoutText())
        .as("memory: 1 GiB, within the sandbox's own 2 GiB, is refused by the parent's 768 MiB")
        .doesNotContain("ALLOCATED");
    assertThat(hog.exitCode() == 137 || hog.stderrText().contains("MemoryError"))
        .as("memory: the bomb was OOM-killed (137) or refused (MemoryError), got %s", hog)
        .isTrue();
    // (this kernel counts no failcnt for v1 limits: the peak shows which limit was reached)
    assertThat(read(parentFile("memory", "memory.max_usage_in_bytes")))
        .as(
            "memory: what stopped the bomb was the parent's limit: all sandboxes together reached"
                + " it, and never used more")
        .isLessThanOrEqualTo(PARENT_MEMORY)
        .isGreaterThan(PARENT_MEMORY - (32L << 20));
    assertThat(read(sandboxFile("memory", bomberRef, "memory.max_usage_in_bytes")))
        .as("memory: the bomb's sandbox never came near its own 2 GiB")
        .isLessThanOrEqualTo(PARENT_MEMORY);
    if (hog.exitCode() == 137) {
      assertThat(oomKills(sandboxFile("memory", bomberRef, "memory.oom_control")))
          .as("memory: the OOM killer killed inside the bomb's own sandbox")
          .isPositive();
    }
    assertThat(ok(other, "echo other-alive").strip())
        .as("the other sandbox carries on after its neighbour's memory bomb")
        .isEqualTo("other-alive");
    assertThat(ok(bomber, "echo still-alive").strip())
        .as("the bomb's sandbox carries on: the kill ended the command, not the sandbox")
        .isEqualTo("still-alive");
    byte[] hostAllocation = new byte[64 << 20];
    hostAllocation[hostAllocation.length - 1] = 1;
    assertThat(hostAllocation[hostAllocation.length - 1])
        .as("the host JVM carries on and can still allocate")
        .isEqualTo((byte) 1);
    assertThat(read(parentFile("memory", "memory.limit_in_bytes")))
        .as("the parent cgroup has the memory limit of all sandboxes")
        .isEqualTo(PARENT_MEMORY);
  }

  @Test
  void theParentAndItsLimitsComeBackWithTheFirstStartAfterTheyWereGone() throws Exception {
    Workspace ws = create(builder());
    WorkspaceRef ref = ws.ref().orElseThrow();
    sandboxes.stop(ref);
    // as after a reboot: the parent cgroups are gone (no sandbox runs, so they are empty)
    for (String controller : List.of("pids", "memory", "cpu")) {
      Path dir = parentFile(controller, "");
      removeEmptyTree(dir);
      assertThat(dir).as("%s parent removed, as a reboot would", controller).doesNotExist();
    }
    sandboxes.start(ref);
    assertThat(read(parentFile("pids", "pids.max")))
        .as("pids: the start recreated the parent with its limit")
        .isEqualTo(PARENT_PIDS);
    assertThat(read(parentFile("memory", "memory.limit_in_bytes")))
        .as("memory: the start recreated the parent with its limit")
        .isEqualTo(PARENT_MEMORY);
    assertThat(read(parentFile("cpu", "cpu.shares")))
        .as("cpu: the start recreated the parent with its weight")
        .isEqualTo(HostLimits.SANDBOXES_CPU_SHARES);
    String cgroups = ok(ws, "cat /proc/self/cgroup");
    assertThat(sandboxFile("pids", ref, "cgroup.procs"))
        .as("the restarted sandbox's cgroup is under the parent (%s)", cgroups)
        .exists();

    ForkResult fork = sandboxes.fork(ref);
    own.add(fork.ref());
    assertThat(sandboxFile("pids", fork.ref(), "cgroup.procs"))
        .as(
            "a fork's cgroup is under the parent too (processes copied: %s)",
            fork.processesCopied())
        .exists();
    assertThat(Files.readString(sandboxFile("pids", fork.ref(), "cgroup.procs")).strip())
        .as("the fork's processes run in its cgroup under the parent")
        .isNotEmpty();
  }

  private static void removeEmptyTree(Path dir) throws IOException {
    if (!Files.isDirectory(dir)) {
      return;
    }
    try (Stream<Path> children = Files.list(dir)) {
      for (Path child : children.filter(Files::isDirectory).toList()) {
        removeEmptyTree(child);
      }
    }
    Files.delete(dir);
  }

  private static long oomKills(Path oomControl) throws IOException {
    for (String line : Files.readAllLines(oomControl)) {
      if (line.startsWith("oom_kill ")) {
        return Long.parseLong(line.substring("oom_kill ".length()).strip());
      }
    }
    return 0;
  }

  private static List<ProcessHandle> supervisors() {
    List<ProcessHandle> found = new ArrayList<>();
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      for (Path p : procs.toList()) {
        String name = p.getFileName().toString();
        if (!name.chars().allMatch(Character::isDigit)) {
          continue;
        }
        try {
          String cmdline = Files.readString(p.resolve("cmdline")).replace('\0', ' ');
          if (cmdline.contains(Supervisor.class.getName() + " " + home + " ")) {
            ProcessHandle.of(Long.parseLong(name)).ifPresent(found::add);
          }
        } catch (IOException e) {
          // exited
        }
      }
    } catch (IOException e) {
      // no /proc: nothing started
    }
    return found;
  }
}
