package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Crash safety, destroy idempotence and attach across JVMs (issue 3, "Lifecycle"): a child JVM
 * ({@link CrashChild}) is killed with SIGKILL at random points of create, exec, destroy and a
 * create-exec-destroy loop; afterwards every sandbox it touched is either usable (attach, {@code
 * echo ok}; then destroyed by the test) or removed by {@code gc}, and of neither is anything left:
 * no directory (neither {@code <id>}, {@code .new-<id>} nor {@code .destroyed-<id>-*}), no overlay
 * mount, no crun container, no cgroup, no process.
 *
 * <p>The test works in the engine's default home ({@code $SANDBOX4J_HOME} or {@code
 * /var/lib/sandbox4j}), where the default image already is, and touches only its own sandboxes:
 * those the child printed, and those that appeared during the test (a child killed before it knew
 * its id prints none) unless their record carries someone else's label. {@code gc} itself runs on
 * the whole home, as a user would run it. The seed is logged; {@code -Dcrash.seed=N} replays one.
 *
 * <p>Each phase kills {@code -Dcrash.kills=N} children (default {@value #CI_KILLS}, the short run
 * that CI affords); {@code bench/crash-safety} runs the long version.
 */
class CrashSafetyTest {
  private static final Pattern ID = Pattern.compile("[a-z0-9]{1,32}");
  private static final String DESTROYED = ".destroyed-";
  private static final String NEW = ".new-";
  private static final long SEED = Long.getLong("crash.seed", System.nanoTime());
  private static final Random RANDOM = new Random(SEED);
  private static final String TAG = "crash-" + Long.toString(SEED & Long.MAX_VALUE, 36);
  private static final Path LOGS = Path.of("target", "crash-safety");
  private static final int CI_KILLS = 4;
  private static final int KILLS = Integer.getInteger("crash.kills", CI_KILLS);

  private static LocalSandbox provider;
  private static Path home;
  private static Set<String> preexisting;
  private static final Set<String> evaluated = new TreeSet<>();
  private static final Map<String, String> summary = new LinkedHashMap<>();

  @BeforeAll
  static void setUp() throws IOException {
    Prerequisites.requireLocalEngine();
    log("seed " + SEED + " (replay with -Dcrash.seed=" + SEED + "), label " + TAG);
    String env = System.getenv("SANDBOX4J_HOME");
    home = env == null || env.isBlank() ? LocalSandbox.DEFAULT_HOME : Path.of(env);
    provider = CrashChild.provider(home, TAG);
    // Ensures the default image exists before anything is timed (built once per machine).
    WorkspaceRef warmup = Workspace.of(provider.newBackend()).open();
    provider.destroy(warmup);
    preexisting = scanIds();
    Files.createDirectories(LOGS);
  }

  @AfterAll
  static void report() {
    summary.forEach((phase, line) -> log("summary " + phase + ": " + line));
    if (provider == null) {
      return;
    }
    // After a failure, sandboxes of this run may remain: they were reported; do not keep them.
    for (SandboxInfo info : provider.list()) {
      if (TAG.equals(info.labels().get(CrashChild.LABEL))) {
        log("cleanup: destroying " + info.ref() + ", left by a failed check");
        provider.destroy(info.ref());
      }
    }
  }

  // ---- kills at random points -------------------------------------------------------------

  @Test
  void killDuringCreate() throws Exception {
    Set<String> printed = new TreeSet<>();
    long[] samples = new long[3];
    List<Child> calibrations = Child.startAll("create-calibration", samples.length, i -> CREATE);
    List<Child> children = Child.startAll("create", KILLS, i -> CREATE);
    Child.awaitWarm(calibrations, children);
    for (int i = 0; i < samples.length; i++) {
      Child calibration = calibrations.get(i);
      samples[i] = calibration.millisUntil("DONE");
      assertThat(calibration.awaitExit()).as("create-calibration's exit code").isZero();
      printed.addAll(calibration.refs());
    }
    long millis = median(samples);
    log("create: a whole create takes " + millis + " ms after READY (median of 3)");
    int reported = 0;
    for (Child child : children) {
      List<String> refs = child.killAfter(delayWithin(millis * 5 / 4));
      reported += refs.size();
      printed.addAll(refs);
    }
    log("create: " + reported + " of " + KILLS + " killed children had printed their ref");
    evaluate("create", printed, false);
  }

  @Test
  void killDuringExec() throws Exception {
    Set<String> refs = new TreeSet<>();
    long[] samples = new long[3];
    List<WorkspaceRef> sandboxes = openAll(samples.length + KILLS);
    sandboxes.forEach(r -> refs.add(r.id()));
    List<Child> calibrations =
        Child.startAll(
            "exec-calibration", samples.length, i -> args("exec", sandboxes.get(i).toString()));
    List<Child> children =
        Child.startAll(
            "exec", KILLS, i -> args("exec", sandboxes.get(samples.length + i).toString()));
    Child.awaitWarm(calibrations, children);
    for (int i = 0; i < samples.length; i++) {
      Child calibration = calibrations.get(i);
      samples[i] = calibration.millisUntil("STARTED");
      calibration.killAfter(0);
    }
    long millis = median(samples);
    log("exec: attach until the command runs takes " + millis + " ms after READY (median of 3)");
    int started = 0;
    for (Child child : children) {
      child.killAfter(delayWithin(millis * 2));
      started += child.lines().contains("STARTED") ? 1 : 0;
    }
    log("exec: " + started + " of " + KILLS + " children were killed while their command ran");
    // A command's crash changes nothing of its sandbox's life: every one must still be usable.
    evaluate("exec", refs, true);
  }

  @Test
  void killDuringDestroy() throws Exception {
    Set<String> refs = new TreeSet<>();
    long[] samples = new long[3];
    List<WorkspaceRef> sandboxes = openAll(samples.length + KILLS);
    sandboxes.forEach(r -> refs.add(r.id()));
    List<Child> calibrations =
        Child.startAll(
            "destroy-calibration",
            samples.length,
            i -> args("destroy", sandboxes.get(i).toString()));
    List<Child> children =
        Child.startAll(
            "destroy", KILLS, i -> args("destroy", sandboxes.get(samples.length + i).toString()));
    Child.awaitWarm(calibrations, children);
    for (int i = 0; i < samples.length; i++) {
      Child calibration = calibrations.get(i);
      samples[i] = calibration.millisUntil("DONE");
      assertThat(calibration.awaitExit()).as("destroy-calibration's exit code").isZero();
    }
    long millis = median(samples);
    log("destroy: a whole destroy takes " + millis + " ms after READY (median of 3)");
    int finished = 0;
    for (int i = 0; i < KILLS; i++) {
      WorkspaceRef ref = sandboxes.get(samples.length + i);
      Child child = children.get(i);
      child.killAfter(delayWithin(millis * 5 / 4));
      finished += child.lines().contains("DESTROYED " + ref) ? 1 : 0;
    }
    log("destroy: " + finished + " of " + KILLS + " killed children had finished destroying");
    evaluate("destroy", refs, false);
  }

  @Test
  void killDuringLoop() throws Exception {
    Set<String> printed = new TreeSet<>();
    Child calibration = Child.start("loop-calibration", "loop");
    List<Child> children = Child.startAll("loop", KILLS, i -> args("loop"));
    Child.awaitWarm(List.of(calibration), children);
    long millis = calibration.millisUntil("DONE 3") / 3;
    printed.addAll(calibration.killAfter(0));
    log("loop: an iteration takes " + millis + " ms (mean of 3)");
    for (Child child : children) {
      // within two iterations: every step of one, both in a first and in a later iteration
      printed.addAll(child.killAfter(delayWithin(millis * 2)));
    }
    evaluate("loop", printed, false);
  }

  /**
   * Kills during suspend, exec, stop, start, fork (live where checkpoint/restore works), snapshot
   * and hibernate: the sandbox must stay usable (an exec wakes it), a fork is usable or removed by
   * gc, and a snapshot exists whole or not at all.
   */
  @Test
  void killDuringLifecycle() throws Exception {
    Set<String> parents = new TreeSet<>();
    List<String> names = new ArrayList<>();
    try {
      List<WorkspaceRef> sandboxes = openAll(1 + KILLS);
      sandboxes.forEach(r -> parents.add(r.id()));
      WorkspaceRef first = sandboxes.getFirst();
      String calibrationName = TAG + "-cal";
      names.add(calibrationName);
      Child calibration =
          Child.start("lifecycle-calibration", "lifecycle", first.toString(), calibrationName);
      for (int i = 0; i < KILLS; i++) {
        names.add(TAG + "-" + i);
        Workspace.of(provider.backend(sandboxes.get(1 + i)).orElseThrow())
            .run(Command.shell("sleep 1000 > /dev/null 2>&1 &"));
      }
      List<Child> children =
          Child.startAll(
              "lifecycle",
              KILLS,
              i -> args("lifecycle", sandboxes.get(1 + i).toString(), TAG + "-" + i));
      Child.awaitWarm(List.of(calibration), children);
      long millis = calibration.millisUntil("DONE 2") / 2;
      calibration.killAfter(0);
      log("lifecycle: an iteration takes " + millis + " ms (mean of 2)");
      for (Child child : children) {
        child.killAfter(delayWithin(millis * 3 / 2));
      }
      // Forks carry the parents' label: evaluate finds them among the new ids.
      evaluate("lifecycle", parents, true);
      Path images = home.resolve("images");
      for (String name : names) {
        boolean complete =
            provider.snapshots().stream().anyMatch(s -> s.name().equals(name))
                && Files.isRegularFile(images.resolve(name).resolve("image.json"));
        try (Stream<Path> entries = Files.list(images)) {
          List<String> partial =
              entries
                  .map(p -> p.getFileName().toString())
                  .filter(n -> n.startsWith(".build-" + name + "-") || n.startsWith(".old-" + name))
                  .toList();
          assertThat(partial).as("leftovers of snapshot " + name + " after gc").isEmpty();
        }
        if (!complete) {
          assertThat(images.resolve(name)).as("a half snapshot " + name).doesNotExist();
        }
      }
    } finally {
      for (String name : names) {
        provider.removeSnapshot(name);
      }
    }
    Prerequisites.requireCheckpointRestore(
        provider.engine().runtime(), "the hibernate and live-fork kills");
  }

  private static final String[] CREATE = {"create"};

  private static String[] args(String... args) {
    return args;
  }

  /**
   * Opens {@code count} sandboxes of the test's provider, a few at a time (the engine creates
   * concurrently); the test owns them from here.
   */
  private static List<WorkspaceRef> openAll(int count) throws Exception {
    try (var pool = java.util.concurrent.Executors.newFixedThreadPool(3)) {
      List<java.util.concurrent.Future<WorkspaceRef>> opened = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        opened.add(pool.submit(() -> Workspace.of(provider.newBackend()).open()));
      }
      List<WorkspaceRef> refs = new ArrayList<>();
      for (var f : opened) {
        refs.add(f.get());
      }
      return refs;
    }
  }

  private static long median(long[] samples) {
    long[] sorted = samples.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  /** A random delay in [0, bound] ms. */
  private static int delayWithin(long bound) {
    return RANDOM.nextInt((int) Math.max(1, bound) + 1);
  }

  // ---- across JVMs --------------------------------------------------------------------------

  @Test
  void attachAcrossJvms() throws Exception {
    Child creator = Child.start("attach-create", "create", "across.txt", "written by " + TAG);
    assertThat(creator.awaitExit()).as("creator's exit code").isZero();
    assertThat(creator.lines()).contains("WROTE");
    WorkspaceRef ref = new WorkspaceRef(LocalSandbox.NAME, creator.refs().getFirst());
    evaluated.add(ref.id());

    Workspace ws = Workspace.of(provider.backend(ref).orElseThrow());
    assertThat(ws.readText("across.txt")).isEqualTo("written by " + TAG);
    assertThat(ws.run(Command.shell("echo ok")).stdoutText()).isEqualTo("ok\n");

    Child destroyer = Child.start("attach-destroy", "destroy", ref.toString());
    assertThat(destroyer.awaitExit()).as("destroyer's exit code").isZero();
    assertThat(destroyer.lines()).contains("DESTROYED " + ref);

    assertThatThrownBy(() -> ws.run(Command.shell("echo ok")))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(
            () -> Workspace.of(provider.backend(ref).orElseThrow()).run(Command.shell("echo ok")))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThat(leftovers(ref.id())).as("left of " + ref).isEmpty();
  }

  @Test
  void destroyIsIdempotentAcrossJvms() throws Exception {
    for (int round = 0; round < 3; round++) {
      WorkspaceRef ref = Workspace.of(provider.newBackend()).open();
      evaluated.add(ref.id());
      Workspace.of(provider.backend(ref).orElseThrow())
          .run(Command.shell("sleep 1000 > /dev/null 2>&1 & echo started"));
      Child first = Child.start("destroy-twice-" + round + "a", "destroy", ref.toString());
      Child second = Child.start("destroy-twice-" + round + "b", "destroy", ref.toString());
      first.awaitReady();
      second.awaitReady();
      assertThat(first.awaitExit()).as("first destroyer's exit code").isZero();
      assertThat(second.awaitExit()).as("second destroyer's exit code").isZero();
      assertThat(first.lines()).contains("DESTROYED " + ref);
      assertThat(second.lines()).contains("DESTROYED " + ref);
      provider.destroy(ref); // and a third time, from this JVM
      assertThat(leftovers(ref.id())).as("left of " + ref).isEmpty();
    }
  }

  /**
   * gc from one JVM while another destroys: gc must skip what is being destroyed (it is not
   * interrupted), neither side may fail, and nothing may be left. The sandboxes get a few thousand
   * files each, so that deleting their writable layer takes long enough for gc to meet it.
   */
  @Test
  void gcWhileAnotherJvmDestroys() throws Exception {
    List<String> refs = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      WorkspaceRef ref = Workspace.of(provider.newBackend()).open();
      evaluated.add(ref.id());
      CommandResult filled =
          Workspace.of(provider.backend(ref).orElseThrow())
              .run(Command.shell("mkdir many && cd many && seq 1 3000 | xargs touch"));
      assertThat(filled.succeeded()).as(filled.toString()).isTrue();
      refs.add(ref.toString());
    }
    List<String> args = new ArrayList<>(List.of("destroy"));
    args.addAll(refs);
    Child destroyer = Child.start("gc-while-destroy", args.toArray(String[]::new));
    destroyer.awaitReady();
    List<String> gcFailures = new ArrayList<>();
    int rounds = 0;
    while (destroyer.process.isAlive()) {
      try {
        provider.gc();
      } catch (RuntimeException e) {
        gcFailures.add(e.toString());
      }
      rounds++;
    }
    log("gc-while-destroy: " + rounds + " gc runs while the other JVM destroyed");
    int exit = destroyer.awaitExit();
    List<String> left = new ArrayList<>();
    for (String ref : refs) {
      left.addAll(leftovers(WorkspaceRef.parse(ref).id()));
    }
    assertThat(gcFailures).as("gc failures").isEmpty();
    assertThat(exit)
        .as("destroyer's exit code; see " + LOGS.resolve("gc-while-destroy.stderr"))
        .isZero();
    assertThat(left).as("left").isEmpty();
  }

  /**
   * The first record of a sandbox is not synced (only the RUNNING one is), so a power loss during a
   * create can leave it empty or cut short under the sandbox's name: gc must remove such a sandbox,
   * not stop at it. (The container of this one still runs; after a real power loss it would not.)
   */
  @Test
  void gcRemovesASandboxWhoseRecordAPowerLossTore() throws Exception {
    for (String torn : List.of("", "{\"formatVersion\" : 1, \"id\" : \"ab", "\0\0\0\0")) {
      WorkspaceRef ref = Workspace.of(provider.newBackend()).open();
      evaluated.add(ref.id());
      Files.writeString(home.resolve("sandboxes").resolve(ref.id()).resolve("state.json"), torn);

      List<String> removed = provider.gc();

      assertThat(removed).as("torn record " + torn).contains("interrupted sandbox " + ref);
      assertThat(leftovers(ref.id())).as("left of " + ref).isEmpty();
    }
    WorkspaceRef ref = Workspace.of(provider.newBackend()).open();
    evaluated.add(ref.id());
    Files.writeString(home.resolve("sandboxes").resolve(ref.id()).resolve("state.json"), "");
    provider.destroy(ref); // an explicit destroy copes with it too
    assertThat(leftovers(ref.id())).as("left of " + ref + " after destroy").isEmpty();
  }

  @Test
  void gcLeavesARecordItCannotReadAloneAndCarriesOnWithTheRest() throws Exception {
    WorkspaceRef newer = Workspace.of(provider.newBackend()).open();
    evaluated.add(newer.id());
    Path state = home.resolve("sandboxes").resolve(newer.id()).resolve("state.json");
    String whole = Files.readString(state).replace("\"RUNNING\"", "\"TELEPORTED\"");
    Files.writeString(state, whole); // whole JSON, but a state this version does not know
    WorkspaceRef torn = Workspace.of(provider.newBackend()).open();
    evaluated.add(torn.id());
    Files.writeString(home.resolve("sandboxes").resolve(torn.id()).resolve("state.json"), "");

    try {
      List<String> removed = provider.gc();

      assertThat(removed)
          .contains("interrupted sandbox " + torn)
          .doesNotContain("interrupted sandbox " + newer);
      assertThat(home.resolve("sandboxes").resolve(newer.id())).isDirectory();
      assertThat(Files.readString(state)).isEqualTo(whole);
    } finally {
      // cleaned up by hand, as its newer version would: a usable record again, then destroy
      Files.writeString(state, whole.replace("\"TELEPORTED\"", "\"RUNNING\""));
      provider.destroy(newer);
    }
    assertThat(leftovers(newer.id())).isEmpty();
  }

  // ---- evaluation ---------------------------------------------------------------------------

  /**
   * Runs gc, then requires of every sandbox of the phase that gc removed it or that it is usable
   * (the test then destroys it), and that nothing of it is left either way; with {@code
   * mustStayUsable}, each of {@code printed} must be usable.
   */
  private static void evaluate(String phase, Set<String> printed, boolean mustStayUsable)
      throws IOException {
    Set<String> candidates = new TreeSet<>(printed);
    for (String id : scanIds()) {
      if (!preexisting.contains(id) && !evaluated.contains(id) && !isForeign(id)) {
        candidates.add(id);
      }
    }
    log(phase + ": candidates " + candidates + " (printed by children: " + printed + ")");
    Map<String, List<String>> before = new LinkedHashMap<>();
    for (String id : candidates) {
      before.put(id, leftovers(id));
    }
    List<String> failures = new ArrayList<>();
    List<String> removed;
    try {
      removed = provider.gc();
    } catch (RuntimeException e) {
      // Reported below; a second gc lets the phase still sort out what is left.
      failures.add("gc failed: " + e);
      log(phase + ": gc failed: " + e + "; once more");
      removed = provider.gc();
    }
    log(phase + ": gc said " + removed);

    int gone = 0;
    int gcRemoved = 0;
    int usable = 0;
    int counted = 0;
    for (String id : candidates) {
      if (isForeign(id)) {
        log(phase + ": " + id + " belongs to someone else after all; not touched");
        continue;
      }
      evaluated.add(id);
      List<String> after = leftovers(id);
      if (after.isEmpty() && before.get(id).isEmpty() && !printed.contains(id)) {
        continue; // seen briefly while someone created or destroyed it: whose, nobody can tell
      }
      counted++;
      if (after.isEmpty()) {
        if (before.get(id).isEmpty()) {
          gone++;
          log(phase + ": " + id + " gone before gc");
        } else {
          gcRemoved++;
          log(phase + ": " + id + " removed by gc; it had " + before.get(id));
        }
        if (mustStayUsable && printed.contains(id)) {
          failures.add(id + " should have stayed usable but gc removed it: " + before.get(id));
        }
        continue;
      }
      Optional<String> unusable = usability(id);
      if (unusable.isPresent()) {
        failures.add(
            id + " is neither usable (" + unusable.get() + ") nor removed by gc; left: " + after);
        continue;
      }
      usable++;
      log(phase + ": " + id + " usable");
      provider.destroy(new WorkspaceRef(LocalSandbox.NAME, id));
      List<String> afterDestroy = leftovers(id);
      if (!afterDestroy.isEmpty()) {
        failures.add(id + " was usable, but destroy left " + afterDestroy);
      }
    }
    String line =
        counted
            + " sandboxes: "
            + usable
            + " usable (destroyed by the test), "
            + gcRemoved
            + " removed by gc, "
            + gone
            + " already gone";
    summary.put(phase, line);
    log(phase + ": " + line);
    assertThat(failures).as(phase + " (seed " + SEED + ")").isEmpty();
  }

  /** Empty if {@code echo ok} runs in the sandbox after attaching by ref; else why not. */
  private static Optional<String> usability(String id) {
    try {
      Workspace ws =
          Workspace.of(provider.backend(new WorkspaceRef(LocalSandbox.NAME, id)).orElseThrow());
      CommandResult r = ws.run(Command.shell("echo ok"));
      return r.succeeded() && r.stdoutText().equals("ok\n")
          ? Optional.empty()
          : Optional.of("echo ok gave " + r);
    } catch (WorkspaceException e) {
      return Optional.of(e.toString());
    }
  }

  /**
   * Whether the sandbox's record, also one in a {@code .new-*} or {@code .destroyed-*} directory,
   * says another test or user made it.
   */
  private static boolean isForeign(String id) {
    Path sandboxes = home.resolve("sandboxes");
    List<Path> records =
        new ArrayList<>(
            List.of(
                sandboxes.resolve(id).resolve("state.json"),
                sandboxes.resolve(NEW + id).resolve("state.json")));
    try (Stream<Path> entries = Files.list(sandboxes)) {
      entries
          .filter(p -> p.getFileName().toString().startsWith(DESTROYED + id + "-"))
          .forEach(p -> records.add(p.resolve("state.json")));
    } catch (IOException e) {
      // no sandboxes directory: nothing to tell
    }
    for (Path record : records) {
      try {
        return !TAG.equals(SandboxRecord.read(record).labels().get(CrashChild.LABEL));
      } catch (IOException e) {
        // no record (yet, or any more): try the next
      }
    }
    return false; // no record: made by a child killed before it wrote one, or gone
  }

  /**
   * Everything of sandbox {@code id} that is still on this host, once the host's init has reaped
   * what had already died: a {@code crun exec} whose JVM was killed is the init's child, and ends
   * as a zombie until the init collects it (this machine's init does that about once a second). A
   * zombie runs nothing and holds nothing, but it still counts if it is not gone after 10 s.
   */
  static List<String> leftovers(String id) throws IOException {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (true) {
      List<String> left = leftoversNow(id);
      if (left.stream().noneMatch(l -> l.contains(ZOMBIE)) || System.nanoTime() > end) {
        return left;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return left;
      }
    }
  }

  private static final String ZOMBIE = "] state Z,";
  private static final String EXITED = "(exited)";

  private static List<String> leftoversNow(String id) throws IOException {
    List<String> left = new ArrayList<>();
    Path sandboxes = home.resolve("sandboxes");
    for (Path dir : List.of(sandboxes.resolve(id), sandboxes.resolve(NEW + id))) {
      if (Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
        left.add("directory " + dir);
      }
    }
    if (Files.isDirectory(sandboxes)) {
      try (Stream<Path> entries = Files.list(sandboxes)) {
        entries
            .filter(p -> p.getFileName().toString().startsWith(DESTROYED + id + "-"))
            .forEach(p -> left.add("directory " + p));
      }
    }
    for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
      String mountPoint = line.split(" ")[4];
      if (mountPoint.startsWith(sandboxes + "/")
          && (mountPoint.contains("/" + id + "/")
              || mountPoint.contains("/" + NEW + id + "/")
              || mountPoint.contains(DESTROYED + id + "-"))) {
        left.add("mount " + mountPoint);
      }
    }
    if (crunContainers().contains(id)) {
      left.add("crun container " + id);
    }
    if (Files.isDirectory(IdBlocks.CLAIMS)) { // its block of host ids, claimed host-wide
      String claim = home.toAbsolutePath().normalize() + "\n" + id;
      try (Stream<Path> claims = Files.list(IdBlocks.CLAIMS)) {
        for (Path c : claims.filter(c -> c.getFileName().toString().matches("[0-9]+")).toList()) {
          try {
            if (Files.readString(c).equals(claim)) {
              left.add("host id claim " + c);
            }
          } catch (java.nio.file.NoSuchFileException freedMeanwhile) {
            // freed by another sandbox's destroy
          }
        }
      }
    }
    try (Stream<Path> hierarchies = Files.list(Path.of("/sys/fs/cgroup"))) {
      for (Path h : hierarchies.toList()) {
        Path cgroup = h.resolve(Cgroups.parentFor(home)).resolve(id);
        if (Files.isDirectory(cgroup)) {
          left.add("cgroup " + cgroup);
        }
      }
    }
    for (Map.Entry<Long, String> p : processesInSandboxCgroups().entrySet()) {
      String process = describe(p.getKey());
      if (p.getValue().equals(id) && !process.endsWith(EXITED)) {
        left.add("process " + process);
      }
    }
    return left;
  }

  /**
   * Ids of every sandbox of this home anything is left of: directories (also {@code .new-*} and
   * {@code .destroyed-*}), mounts, crun containers, and cgroups nothing runs in.
   */
  static Set<String> scanIds() throws IOException {
    Set<String> ids = new TreeSet<>();
    Path sandboxes = home.resolve("sandboxes");
    if (Files.isDirectory(sandboxes)) {
      try (Stream<Path> entries = Files.list(sandboxes)) {
        for (Path p : entries.toList()) {
          String name = p.getFileName().toString();
          idOf(name).ifPresent(ids::add);
        }
      }
    }
    for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
      String mountPoint = line.split(" ")[4];
      if (mountPoint.startsWith(sandboxes + "/")) {
        idOf(mountPoint.substring(sandboxes.toString().length() + 1).split("/")[0])
            .ifPresent(ids::add);
      }
    }
    ids.addAll(crunContainers());
    // A cgroup without a directory here is an orphan of this home only if nothing runs in it:
    // every container of this home is in its crun list above, and cgroups are shared by all homes.
    Set<String> populated = new TreeSet<>(processesInSandboxCgroups().values());
    try (Stream<Path> hierarchies = Files.list(Path.of("/sys/fs/cgroup"))) {
      for (Path h : hierarchies.toList()) {
        Path parent = h.resolve(Cgroups.parentFor(home));
        if (Files.isDirectory(parent)) {
          try (Stream<Path> children = Files.list(parent)) {
            children
                .filter(Files::isDirectory)
                .map(p -> p.getFileName().toString())
                .filter(n -> ID.matcher(n).matches() && !populated.contains(n))
                .forEach(ids::add);
          }
        }
      }
    }
    return ids;
  }

  /**
   * The sandbox id an entry of {@code sandboxes/} belongs to: {@code <id>}, {@code .new-<id>}, or
   * {@code .destroyed-<id>-<random>}.
   */
  private static Optional<String> idOf(String name) {
    String id = name;
    if (name.startsWith(NEW)) {
      id = name.substring(NEW.length());
    } else if (name.startsWith(DESTROYED) && name.lastIndexOf('-') > DESTROYED.length()) {
      id = name.substring(DESTROYED.length(), name.lastIndexOf('-'));
    }
    return ID.matcher(id).matches() ? Optional.of(id) : Optional.empty();
  }

  private static Set<String> crunContainers() throws IOException {
    Path root = home.resolve("run").resolve("crun");
    Process p =
        new ProcessBuilder("crun", "--root", root.toString(), "list", "-q")
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    try {
      p.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
    Set<String> ids = new TreeSet<>();
    if (p.exitValue() == 0) {
      for (String id : out.strip().split("\\s+")) {
        if (!id.isEmpty()) {
          ids.add(id);
        }
      }
    } else if (Files.isDirectory(root)) {
      throw new IOException("crun list failed: " + out);
    }
    return ids;
  }

  /** pid → sandbox id, for every process in some hierarchy's {@code /sandbox4j/<id>} cgroup. */
  private static Map<Long, String> processesInSandboxCgroups() throws IOException {
    Map<Long, String> found = new LinkedHashMap<>();
    String marker = "/" + Cgroups.parentFor(home) + "/";
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      for (Path proc : procs.toList()) {
        String name = proc.getFileName().toString();
        if (!name.chars().allMatch(Character::isDigit)) {
          continue;
        }
        List<String> lines;
        try {
          lines = Files.readAllLines(proc.resolve("cgroup"));
        } catch (IOException e) {
          continue; // exited meanwhile
        }
        for (String line : lines) {
          int at = line.indexOf(marker);
          if (at >= 0) {
            String id = line.substring(at + marker.length()).split("/")[0];
            if (ID.matcher(id).matches()) {
              found.put(Long.parseLong(name), id);
              break;
            }
          }
        }
      }
    }
    return found;
  }

  /** pid, state, parent and command line of a process, as /proc has them. */
  private static String describe(long pid) {
    String stat;
    try {
      stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
      String[] after = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      stat =
          "state "
              + after[0]
              + ", parent "
              + after[1]
              + " "
              + commandLine(Long.parseLong(after[1]));
    } catch (IOException | RuntimeException e) {
      stat = EXITED; // between the scan of its cgroup and now
    }
    return pid + " [" + commandLine(pid) + "] " + stat;
  }

  private static String commandLine(long pid) {
    try {
      return new String(
              Files.readAllBytes(Path.of("/proc/" + pid + "/cmdline")), StandardCharsets.UTF_8)
          .replace('\0', ' ')
          .strip();
    } catch (IOException e) {
      return "(exited)";
    }
  }

  private static void log(String line) {
    System.err.println("[crash-safety] " + line);
  }

  // ---- the child JVM ------------------------------------------------------------------------

  /** A running {@link CrashChild}, its stdout collected line by line. */
  /** Every child started: those a failed phase never let go are killed after it. */
  private static final List<Child> STARTED = new CopyOnWriteArrayList<>();

  @AfterEach
  void killChildrenLeftWaiting() {
    for (Child child : STARTED) {
      child.process.destroyForcibly();
    }
    STARTED.clear();
  }

  private static final class Child {
    private final String name;
    private final Process process;
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final Map<String, Long> firstSeen = new ConcurrentHashMap<>();
    private final CountDownLatch warm = new CountDownLatch(1);
    private final CountDownLatch ready = new CountDownLatch(1);
    private final Thread reader;
    private boolean released;

    private Child(String name, Process process) {
      this.name = name;
      this.process = process;
      this.reader = Thread.ofVirtual().start(this::read);
    }

    static Child start(String name, String... modeAndArgs) throws IOException {
      List<String> argv = new ArrayList<>();
      argv.add(ProcessHandle.current().info().command().orElse("java"));
      argv.add("--enable-native-access=ALL-UNNAMED");
      argv.add("-XX:TieredStopAtLevel=1");
      argv.add("-XX:+UseSerialGC");
      argv.add("-cp");
      argv.add(System.getProperty("java.class.path"));
      argv.add(CrashChild.class.getName());
      argv.add(home.toString());
      argv.add(TAG);
      argv.addAll(List.of(modeAndArgs));
      // stdin is a pipe: the child waits on it for its go (see awaitReady)
      ProcessBuilder builder =
          new ProcessBuilder(argv).redirectError(LOGS.resolve(name + ".stderr").toFile());
      Child child = new Child(name, builder.start());
      STARTED.add(child);
      return child;
    }

    /**
     * Starts {@code count} children at once, the i-th named {@code prefix-i} with the arguments
     * {@code args.apply(i)}: their JVMs start and warm up in parallel, and each waits for its go
     * ({@link #awaitReady}) before its phase.
     */
    static List<Child> startAll(
        String prefix, int count, java.util.function.IntFunction<String[]> args)
        throws IOException {
      List<Child> children = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        children.add(start(prefix + "-" + i, args.apply(i)));
      }
      return children;
    }

    private void read() {
      try (BufferedReader in =
          new BufferedReader(
              new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = in.readLine()) != null; ) {
          lines.add(line);
          firstSeen.putIfAbsent(line, System.nanoTime());
          if (line.equals("WARM")) {
            warm.countDown();
          } else if (line.equals("READY")) {
            ready.countDown();
          }
        }
      } catch (IOException e) {
        // the child died
      }
    }

    /** Milliseconds from READY until the child printed {@code line}; waits for it. */
    long millisUntil(String line) throws InterruptedException {
      awaitReady();
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      while (!firstSeen.containsKey(line)) {
        if (System.nanoTime() > end || !process.isAlive() && !reader.isAlive()) {
          throw new AssertionError(
              name + " never said " + line + "; see " + LOGS.resolve(name + ".stderr"));
        }
        Thread.sleep(1);
      }
      return (firstSeen.get(line) - firstSeen.get("READY")) / 1_000_000;
    }

    List<String> lines() {
      return List.copyOf(lines);
    }

    /**
     * Waits until every child given has warmed up: so that no JVM still starting takes CPU from a
     * calibration or a timed phase.
     */
    @SafeVarargs
    static void awaitWarm(List<Child>... groups) throws InterruptedException {
      for (List<Child> group : groups) {
        for (Child child : group) {
          if (!child.warm.await(120, TimeUnit.SECONDS)) {
            child.process.destroyForcibly();
            throw new AssertionError(
                child.name + " never warmed up; see " + LOGS.resolve(child.name + ".stderr"));
          }
        }
      }
    }

    /**
     * Waits until the child has warmed up (WARM), lets it go, and waits for its READY: from there
     * on its phase runs. A child started with others may have warmed up long before.
     */
    void awaitReady() throws InterruptedException {
      if (!released) {
        if (!warm.await(120, TimeUnit.SECONDS)) {
          process.destroyForcibly();
          throw new AssertionError(
              name + " never warmed up; see " + LOGS.resolve(name + ".stderr"));
        }
        released = true;
        try {
          process.getOutputStream().write('\n');
          process.getOutputStream().close();
        } catch (IOException e) {
          // it died meanwhile: READY never comes, reported below
        }
      }
      if (!ready.await(60, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        throw new AssertionError(name + " never got ready; see " + LOGS.resolve(name + ".stderr"));
      }
    }

    /** Lets the child go if not yet ({@link #awaitReady}), then waits for its exit. */
    int awaitExit() throws InterruptedException {
      awaitReady();
      if (!process.waitFor(120, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        throw new AssertionError(name + " did not finish; see " + LOGS.resolve(name + ".stderr"));
      }
      awaitStdoutClosed();
      return process.exitValue();
    }

    /**
     * Kills the child with SIGKILL {@code delayMillis} after it said READY, waits until the host
     * tools it had started (crun, mount, ...) finished too, as they would have long before anyone
     * runs gc, and returns the ids it printed.
     */
    List<String> killAfter(int delayMillis) throws InterruptedException {
      awaitReady();
      long readyAt = System.nanoTime();
      Thread.sleep(delayMillis);
      List<ProcessHandle> helpers = process.descendants().toList();
      process.destroyForcibly();
      process.waitFor(30, TimeUnit.SECONDS);
      awaitHelpers(helpers);
      awaitStdoutClosed();
      List<String> said = List.copyOf(lines);
      log(
          name
              + ": killed "
              + delayMillis
              + " ms after READY ("
              + (System.nanoTime() - readyAt) / 1_000_000
              + " ms with the kill), it had said "
              + said.stream().filter(l -> !l.equals("READY")).toList()
              + (process.exitValue() == 137 ? "" : "; exit " + process.exitValue()));
      return refs();
    }

    List<String> refs() {
      return lines.stream()
          .filter(l -> l.startsWith("REF "))
          .map(l -> WorkspaceRef.parse(l.substring(4)).id())
          .toList();
    }

    /**
     * The child's own helper processes, not the container's: those in a sandbox's cgroup (its init,
     * and a {@code crun exec} with the command it runs) live on by design.
     */
    private static void awaitHelpers(List<ProcessHandle> helpers) throws InterruptedException {
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      for (ProcessHandle h : helpers) {
        if (inSandboxCgroup(h.pid())) {
          continue;
        }
        while (h.isAlive() && !isZombie(h) && System.nanoTime() < end) {
          Thread.sleep(5);
        }
        if (h.isAlive() && !isZombie(h)) {
          log("helper " + h.pid() + " " + commandLine(h.pid()) + " still runs after 30 s");
        }
      }
    }

    private static boolean isZombie(ProcessHandle h) {
      return describe(h.pid()).contains(ZOMBIE);
    }

    private static boolean inSandboxCgroup(long pid) {
      try {
        return Files.readString(Path.of("/proc/" + pid + "/cgroup"))
            .contains("/" + Cgroups.parentFor(home) + "/");
      } catch (IOException e) {
        return false;
      }
    }

    /** Every line the child printed has been read once its stdout is closed. */
    private void awaitStdoutClosed() throws InterruptedException {
      if (!reader.join(Duration.ofSeconds(30))) {
        throw new AssertionError(name + ": its stdout stays open after it died");
      }
    }
  }
}
