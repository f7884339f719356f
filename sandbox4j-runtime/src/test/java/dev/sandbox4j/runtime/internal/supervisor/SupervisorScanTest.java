package dev.sandbox4j.runtime.internal.supervisor;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.WarmPools;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Issue 18: the supervisor's work per scan follows changes, not the number of sandboxes. The test
 * holds its private home's {@code supervisor.lock}, as a supervisor process does, so that none
 * starts beside it, and calls the scans of in-process supervisors itself, on real sandboxes: it
 * counts the files each scan reads (no timing), and sees creates, timers, suspends and destroys
 * made after the supervisor started taken in at the next scan.
 */
@Execution(ExecutionMode.SAME_THREAD)
class SupervisorScanTest {
  /**
   * What one idle, running sandbox with an idle timer may cost a scan, each look counted once: its
   * {@code cpu.stat}, its processes' states, the listing of its directory, its activity stamp.
   */
  private static final int READS_PER_TIMED_SANDBOX = 5;

  /** Idle sandboxes with nothing due that the scans must not read (kept small: each is created). */
  private static final int UNTIMED = 20;

  @TempDir static Path temp;

  private static Path home;
  private static FileLock lock;
  private static LocalSandbox sandboxes;
  private static Engine engine;

  @BeforeAll
  static void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    lock = FileLock.tryAcquire(home.resolve(Supervisor.LOCK)).orElseThrow();
    sandboxes = LocalSandbox.builder().home(home).progress(line -> {}).build();
    engine =
        Engine.open(home, Engine.imageStore(home), null, null, -1, SandboxDisk.DEFAULT_OVERCOMMIT);
  }

  @AfterAll
  static void tearDown() throws IOException {
    try {
      if (lock != null) {
        lock.close();
      }
    } finally {
      TestImages.destroyAllAndDelete(sandboxes, home);
    }
  }

  private static WorkspaceRef create(UnaryOperator<LocalSandbox.Builder> options) {
    // a small disk: twenty-odd default ones (10 GiB each) would pass the disk overcommit limit
    LocalSandbox provider =
        options
            .apply(LocalSandbox.builder().home(home).progress(line -> {}).disk(64L << 20))
            .build();
    return Workspace.of(provider.newBackend()).open();
  }

  private static boolean exists(WorkspaceRef ref) {
    return Files.exists(home.resolve("sandboxes").resolve(ref.id()).resolve("state.json"));
  }

  /** Scans every 200 ms until {@code ref}'s sandbox is gone; fails after {@code limit}. */
  private static void scanUntilGone(Supervisor s, WorkspaceRef ref, Duration limit)
      throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    while (exists(ref)) {
      if (System.nanoTime() > end) {
        throw new AssertionError("local:" + ref.id() + " not ended within " + limit);
      }
      s.scan();
      Thread.sleep(200);
    }
  }

  private static String tombstone(WorkspaceRef ref) throws IOException {
    return Files.readString(home.resolve("ended").resolve(ref.id() + ".json"));
  }

  /** In-process supervisors the tests made: their watches end with the test. */
  private final List<Supervisor> made = new ArrayList<>();

  private Supervisor supervisor() throws IOException {
    Supervisor s = Supervisor.scanningOnly(engine);
    made.add(s);
    return s;
  }

  @AfterEach
  void stopWatching() throws IOException {
    for (Supervisor s : made) {
      s.stopWatching();
    }
  }

  @Test
  void aScanReadsNothingForSandboxesWithNothingDueAndSeesChangesAtOnce() throws Exception {
    Supervisor s = supervisor();
    assertThat(s.scan()).as("an empty home").isZero();
    s.scan();
    int emptyHome = s.lastScanReads();
    assertThat(emptyHome).as("files read by a scan of an empty home").isZero();

    // sandboxes with the default timers (only the 24-hour lifetime), created after it started
    List<WorkspaceRef> untimed = new ArrayList<>();
    try (ExecutorService pool = Executors.newFixedThreadPool(4)) {
      List<Future<WorkspaceRef>> made = new ArrayList<>();
      for (int i = 0; i < UNTIMED; i++) {
        made.add(pool.submit((Callable<WorkspaceRef>) () -> create(b -> b)));
      }
      for (Future<WorkspaceRef> f : made) {
        untimed.add(f.get());
      }
    }
    assertThat(s.scan()).as("sandboxes created after the supervisor started").isEqualTo(UNTIMED);
    assertThat(s.lastScanReads()).as("the scan that took them in").isGreaterThanOrEqualTo(UNTIMED);
    s.scan();
    assertThat(s.lastScanReads())
        .as("files read by a scan of %d idle sandboxes with nothing due", UNTIMED)
        .isEqualTo(emptyHome);
    assertThat(s.sampledCount()).isZero();

    // one with an idle timer: only it costs a scan anything
    WorkspaceRef timed = create(b -> b.idleTimeout(Duration.ofHours(1)));
    assertThat(s.scan()).isEqualTo(UNTIMED + 1);
    assertThat(s.sampledCount()).isEqualTo(1);
    s.scan();
    assertThat(s.lastScanReads())
        .as("files read with %d untimed sandboxes and one with an idle timer", UNTIMED)
        .isBetween(1, READS_PER_TIMED_SANDBOX);

    for (WorkspaceRef ref : untimed) {
      sandboxes.destroy(ref);
    }
    assertThat(s.scan()).as("after %d destroys", UNTIMED).isEqualTo(1);
    s.scan();
    assertThat(s.lastScanReads())
        .as("files read with one sandbox with an idle timer")
        .isBetween(1, READS_PER_TIMED_SANDBOX);

    WorkspaceRef idle = create(b -> b.idleTimeout(Duration.ofSeconds(2)));
    scanUntilGone(s, idle, Duration.ofSeconds(20));
    assertThat(tombstone(idle)).contains("idle for its idleTimeout of 2s");
    sandboxes.destroy(timed);
    assertThat(s.scan()).isZero();
    assertThat(s.sampledCount()).isZero();
  }

  @Test
  void aSuspendedSandboxsIdleTimeoutComesFromTheQueue() throws Exception {
    Supervisor s = supervisor();
    s.scan();
    WorkspaceRef ref = create(b -> b.idleTimeout(Duration.ofSeconds(3)));
    s.scan();
    assertThat(s.sampledCount()).as("running, with an idle timer").isEqualTo(1);
    sandboxes.suspend(ref);
    s.scan();
    assertThat(s.sampledCount()).as("suspended: looked at when its idle time is up").isZero();
    s.scan();
    s.scan();
    assertThat(s.lastScanReads()).as("files read for a suspended sandbox not due yet").isZero();
    scanUntilGone(s, ref, Duration.ofSeconds(20));
    assertThat(tombstone(ref)).contains("idle for its idleTimeout of 3s");
  }

  /**
   * No API changes a sandbox's timers once it exists; the one time they are written into an
   * existing directory is a warm pool's claim (timers from the claimer, then the {@code parked}
   * marker goes). The supervisor, started before, takes the claimed sandbox in at its next scan and
   * enforces them.
   */
  @Test
  void aClaimedWarmPoolMembersTimersAreTakenInAtTheNextScan() throws Exception {
    Supervisor s = supervisor();
    s.scan();
    try (LocalSandbox owner =
        LocalSandbox.builder()
            .home(home)
            .progress(line -> {})
            .disk(64L << 20)
            .warmPool(1)
            .build()) {
      WarmPools.awaitReady(owner, Duration.ofSeconds(20));
      Path parked = parkedMember();
      assertThat(s.scan()).as("a parked member is no one's sandbox yet").isZero();
      LocalSandbox claimer =
          LocalSandbox.builder()
              .home(home)
              .progress(line -> {})
              .disk(64L << 20)
              .idleTimeout(Duration.ofSeconds(2))
              .warmPoolOf(owner)
              .build();
      WorkspaceRef ref = Workspace.of(claimer.newBackend()).open();
      assertThat(ref.id()).as("claimed from the pool").isEqualTo(parked.getFileName().toString());
      assertThat(s.scan()).as("the claimed sandbox").isGreaterThanOrEqualTo(1);
      assertThat(s.sampledCount()).as("its idle timer, written at the claim").isEqualTo(1);
      scanUntilGone(s, ref, Duration.ofSeconds(20));
      assertThat(tombstone(ref)).contains("idle for its idleTimeout of 2s");
    }
  }

  /** The directory of the one parked member of a warm pool. */
  private static Path parkedMember() throws IOException {
    try (Stream<Path> dirs = Files.list(home.resolve("sandboxes"))) {
      return dirs.filter(d -> Files.exists(d.resolve(Engine.PARKED))).findFirst().orElseThrow();
    }
  }

  /**
   * A supervisor that knew of a sandbox stops without a word (as under {@code kill -9}: nothing of
   * it survives but the files); a new one, started after, still ends it at its deleteAfter time.
   * ({@code TimersTest} kills real supervisor processes.)
   */
  @Test
  void aNewSupervisorEnforcesWhatItsPredecessorKnew() throws Exception {
    Supervisor first = supervisor();
    first.scan();
    Instant at = Instant.now().plusSeconds(3);
    WorkspaceRef ref = create(b -> b.deleteAfter(at));
    assertThat(first.scan()).isEqualTo(1);

    Supervisor next = supervisor();
    assertThat(next.scan()).as("the first scan of a new supervisor reads the home").isEqualTo(1);
    scanUntilGone(next, ref, Duration.ofSeconds(20));
    assertThat(Instant.now()).isAfterOrEqualTo(at);
    assertThat(tombstone(ref)).contains("its deleteAfter time " + at + " passed");
  }
}
