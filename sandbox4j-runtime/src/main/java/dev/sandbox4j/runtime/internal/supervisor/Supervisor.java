package dev.sandbox4j.runtime.internal.supervisor;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.EnginePorts;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.ports.PortProxy;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.CodeWatch;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.CodeSource;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * The process that enforces the timers of one state directory's sandboxes ({@link Timers}) and
 * serves their ports ({@link PortProxy}) and their egress proxy ({@link EgressProxy}), also when no
 * JVM of the user runs.
 *
 * <p><b>Start.</b> The engine starts it ({@link #ensureRunning}) when a sandbox is created or
 * attached to, and on {@code list}, {@code gc}, {@code url} and {@code forwardTcp}, if some sandbox
 * exists and nobody holds {@code $home/supervisor.lock}: {@code setsid java -cp <this runtime's
 * jars> ...Supervisor <home> <runtime>}, stdin from {@code /dev/null}, stdout and stderr appended
 * to {@code $home/supervisor.log}. In a session of its own it outlives the JVM that started it.
 *
 * <p><b>Lock.</b> It holds an OS lock ({@code flock}) on {@code $home/supervisor.lock} for as long
 * as it runs, so at most one runs per state directory; one started while another runs exits at
 * once. The lock dies with the process: after a {@code kill -9} the next start takes it over.
 *
 * <p><b>Scan.</b> Every {@link #SCAN}: it destroys a sandbox, leaving a tombstone, once {@code
 * deleteAfter} or creation plus {@code sandboxTimeout} has passed; marks it busy (touches its
 * activity stamp) if a command the engine started still runs in it, its processes used more than
 * {@link #BUSY_CPU} CPUs since the last scan, or one of them is runnable (wants the CPU) at the
 * scan; destroys it once it has been idle for {@code idleTimeout}; suspends a running one once it
 * has been idle for {@code autoSuspendTimeout} (through {@link Lifecycle#suspend}, under the
 * sandbox's lock), and wakes it again at once if an operation stamped activity meanwhile.
 *
 * <p><b>Its work follows changes, not the number of sandboxes.</b> It reads a sandbox's record and
 * {@code timers.json} when they change ({@link SandboxChanges}: inotify, with a comparison of the
 * directory every {@link SandboxChanges#RECONCILE} as a safety net), and keeps each sandbox's next
 * deadline in a queue, so a scan costs nothing for a sandbox with nothing due. Only a running
 * sandbox with an idle or auto-suspend timer is looked at every scan (busy means "used more than
 * {@link #BUSY_CPU} since the last look", which a rarer look would average away): its {@code
 * cpu.stat}, its processes' states, its command pid files and its activity stamp, a handful of
 * small reads. A suspended, stopped or hibernated one with an idle timeout is looked at when its
 * last activity plus that timeout comes. All the state it decides on is on disk, so a restarted
 * supervisor reads everything once and picks up where the last one was (its only memory is the
 * previous CPU sample: a sandbox it sees running for the first time is judged from the second scan
 * on).
 *
 * <p><b>Ports.</b> It runs the home's {@link PortProxy} for as long as it runs, binding its port
 * again on every scan until that succeeds (another process may hold it for a while).
 *
 * <p><b>Handover.</b> If a jar it runs from is rebuilt or replaced (and stays so for a scan), it
 * releases the lock, starts a supervisor from the new jars and exits ({@link CodeWatch}): its own
 * classes not loaded yet would be read from the new jar, and fail. A supervisor whose jars were
 * deleted (it runs on, from the files it holds open) is replaced by the next engine use of a
 * process whose own jars exist ({@link #replaceIfItsCodeIsGone}, through {@value #CODE_FILE}).
 *
 * <p><b>Exit.</b> Once the home has had no sandbox for {@link #LINGER}, it releases the lock, looks
 * once more (a sandbox created meanwhile saw the lock held and started nobody), and exits unless
 * there is one, in which case it takes the lock again and goes on. (It runs while any sandbox
 * exists, with timers or not, because it also hosts the home's egress proxy.)
 *
 * <p><b>Its home.</b> It never creates the home or its lock file (the engine that starts it made
 * both), and it pins both by inode ({@link SupervisedHome}). Before every step that may write into
 * the home (a scan, the port proxy, the egress proxy, a handover) it checks that the path still
 * names that directory and that lock file, and exits at once if not: a deleted or replaced home, or
 * a deleted lock file (which no longer keeps a second supervisor out), ends it. So deleting a home
 * ends its supervisor within a scan, and nothing reappears in it.
 */
public final class Supervisor {
  /** CPU use (in CPUs, averaged since the previous scan) above which a sandbox counts as busy. */
  static final double BUSY_CPU = 0.10;

  static final Duration SCAN = Duration.ofSeconds(1);
  static final Duration LINGER = Duration.ofSeconds(10);
  public static final String LOCK = "supervisor.lock";

  /** Its pid and class path, written at its start: {@link #replaceIfItsCodeIsGone}. */
  static final String CODE_FILE = "supervisor.code";

  private static final long CODE_CHECK_INTERVAL_NANOS = 5_000_000_000L;
  private static final Map<Path, Long> CODE_CHECKED = new ConcurrentHashMap<>();
  public static final String LOG_FILE = SandboxHome.SUPERVISOR_LOG;

  private static final long LOG_MAX_BYTES = 1 << 20;
  private static final long RESPAWN_GUARD_NANOS = 5_000_000_000L;
  private static final Map<Path, Long> SPAWNED = new ConcurrentHashMap<>();
  private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private final Engine engine;
  private final PortProxy ports;
  private final Map<String, CpuSample> cpu = new HashMap<>();
  private final CodeWatch code = new CodeWatch(classPath());
  private final SupervisedHome home;
  private String exitReason = "the home has no sandboxes";

  /** The home's egress proxy on the sandboxes' gateway; null until that address exists. */
  private EgressProxy proxy;

  private record CpuSample(long usageMicros, long atNanos) {}

  /** Watches the sandboxes' directories: what changed since the last scan. */
  private final SandboxChanges changes;

  /** Every sandbox directory it knows of, by id, with its record and timers as last read. */
  private final Map<String, Watched> watched = new HashMap<>();

  /** How many of {@link #watched} have a record (parked and half-written ones do not). */
  private int sandboxCount;

  /** When each sandbox's next deadline is; superseded entries stay until they come up. */
  private final PriorityQueue<Due> queue = new PriorityQueue<>(Comparator.comparing(Due::at));

  /** Running sandboxes with an idle or auto-suspend timer: looked at every scan. */
  private final Set<String> sampled = new LinkedHashSet<>();

  /** Files it read in this scan so far; {@link #lastScanReads}: in the last whole scan. */
  private int reads;

  private int lastScanReads;

  /** A sandbox as the last read of its files found it; {@code generation} dates queue entries. */
  private static final class Watched {
    final Path dir;
    SandboxRecord record;
    Timers.Settings settings;
    long generation;

    Watched(Path dir) {
      this.dir = dir;
    }
  }

  private record Due(Instant at, String id, long generation) {}

  private Supervisor(Engine engine, PortProxy ports, SupervisedHome home) throws IOException {
    this.engine = engine;
    this.ports = ports;
    this.home = home;
    this.changes = new SandboxChanges(engine.home().resolve("sandboxes"), Supervisor::say);
  }

  /**
   * A supervisor of {@code engine}'s home that only scans, when {@link #scan} is called: for tests,
   * whose caller holds the home's lock so that no supervisor process acts beside it.
   */
  static Supervisor scanningOnly(Engine engine) throws IOException {
    return new Supervisor(engine, null, null);
  }

  /** Stops the watches of a {@link #scanningOnly} supervisor. */
  void stopWatching() throws IOException {
    changes.close();
  }

  /** Files (records, timers, stamps, cgroup files, listings) the last {@link #scan} looked at. */
  int lastScanReads() {
    return lastScanReads;
  }

  /** How many running sandboxes with idle timers it looks at every scan. */
  int sampledCount() {
    return sampled.size();
  }

  /** {@code Supervisor HOME [RUNTIME]}: supervises HOME until it has no sandboxes or is gone. */
  public static void main(String[] args) throws Exception {
    Path home = Path.of(args[0]);
    Optional<FileLock> lock;
    try {
      // Never created here: the engine that started this made it, and a missing one means that
      // the home is gone or being deleted (creating it would put an entry back into it).
      lock = FileLock.tryAcquireExisting(home.resolve(LOCK));
    } catch (NoSuchFileException gone) {
      say("supervisor " + ProcessHandle.current().pid() + " exits at once: " + home + " is gone");
      return;
    }
    if (lock.isEmpty()) {
      return; // another one supervises this home
    }
    FileLock held = lock.get();
    SupervisedHome pinned;
    try {
      pinned = SupervisedHome.pin(home, held);
    } catch (NoSuchFileException gone) {
      held.close();
      return;
    }
    say("supervisor " + ProcessHandle.current().pid() + " started for " + home);
    try {
      // what it runs from, for an engine that finds those jars gone (replaceIfItsCodeIsGone)
      AtomicFiles.write(
          home.resolve(CODE_FILE),
          (ProcessHandle.current().pid() + "\n" + classPath() + "\n")
              .getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      say("supervisor " + ProcessHandle.current().pid() + " cannot write " + CODE_FILE + ": " + e);
    }
    Engine engine =
        Engine.open(
            home,
            Engine.imageStore(home),
            args.length > 1 ? args[1] : null,
            null,
            -1,
            SandboxDisk.DEFAULT_OVERCOMMIT);
    Supervisor supervisor = null;
    try (pinned;
        PortProxy ports = new PortProxy(new EnginePorts(engine), Supervisor::say)) {
      supervisor = new Supervisor(engine, ports, pinned);
      held = supervisor.run(held);
    } finally {
      if (supervisor != null) {
        supervisor.changes.close();
        if (supervisor.proxy != null) {
          supervisor.proxy.close();
        }
      }
      if (held != null) {
        held.close();
      }
    }
    say(
        "supervisor "
            + ProcessHandle.current().pid()
            + " exits: "
            + (supervisor == null ? "it failed to start" : supervisor.exitReason));
  }

  /** Scans until there is nothing to supervise; returns the lock if it still holds it. */
  private FileLock run(FileLock lock) throws IOException, InterruptedException {
    Path sandboxes = engine.home().resolve("sandboxes");
    long emptySince = -1;
    while (true) {
      if (homeGone()) {
        return lock;
      }
      if (code.replacedAndSettled()) {
        // the rest of this process's classes are gone with the old jar: a fresh JVM takes over
        say(
            "supervisor "
                + ProcessHandle.current().pid()
                + ": its jars were rebuilt or replaced; starting a supervisor from the new ones");
        lock.close();
        spawn(engine.home(), engine.runtime().binary());
        exitReason = "a supervisor started from the new jars took over";
        return null;
      }
      ports.start();
      if (homeGone()) {
        return lock;
      }
      ensureProxy();
      if (homeGone()) {
        return lock;
      }
      int supervised = scan();
      if (supervised > 0 || anySandboxes(sandboxes)) {
        emptySince = -1;
      } else if (emptySince < 0) {
        emptySince = System.nanoTime();
      } else if (System.nanoTime() - emptySince >= LINGER.toNanos()) {
        lock.close();
        if (!anySandboxes(sandboxes)) {
          return null;
        }
        Optional<FileLock> again;
        try {
          again = FileLock.tryAcquireExisting(engine.home().resolve(LOCK));
        } catch (NoSuchFileException gone) {
          exitReason = "its lock file was deleted (the home is going)";
          return null;
        }
        if (again.isEmpty()) {
          exitReason = "a new supervisor took over";
          return null;
        }
        lock = again.get();
        emptySince = -1;
      }
      Thread.sleep(SCAN.toMillis());
    }
  }

  /** Whether its home was deleted or replaced; if so, says so and sets the exit reason. */
  private boolean homeGone() {
    Optional<String> why = home.gone();
    why.ifPresent(w -> exitReason = w);
    return why.isPresent();
  }

  /**
   * Starts the egress proxy ({@link EgressProxy}) on the sandboxes' gateway ({@link
   * Networks#PROXY_PORT}) once the gateway exists; it finds each client's policy through {@link
   * Networks#policyOf}, read per request, so that a policy changed by any JVM applies at once.
   */
  private void ensureProxy() {
    if (proxy != null) {
      return;
    }
    Networks networks = engine.networks();
    try {
      if (!Files.isRegularFile(engine.home().resolve("network").resolve("subnet"))) {
        return; // no sandbox has had a network; asking for the gateway would claim a subnet
      }
      if (!networks.hasGateway()) {
        return; // no sandbox has a network yet
      }
      proxy =
          EgressProxy.builder(networks::policyOf)
              .home(engine.home())
              .bind(Networks.parse(networks.gateway()), Networks.PROXY_PORT)
              .notPublic(networks::isSandboxSubnet)
              .start();
      say("egress proxy listening on " + proxy.address());
    } catch (IOException | RuntimeException e) {
      say("cannot start the egress proxy yet: " + e);
    }
  }

  /**
   * One scan: takes in what changed ({@link SandboxChanges}), enforces the deadlines that are due,
   * and looks at the sandboxes whose idle timers need a look every scan. Returns how many sandboxes
   * the home has (each has its ports served, timers or not).
   */
  int scan() {
    for (String id : changes.changed()) {
      refresh(id);
    }
    Instant now = Instant.now();
    Set<String> due = new LinkedHashSet<>();
    while (!queue.isEmpty() && !queue.peek().at().isAfter(now)) {
      Due d = queue.poll();
      Watched w = watched.get(d.id());
      if (w != null && w.generation == d.generation()) {
        due.add(d.id());
      }
    }
    for (String id : due) {
      refresh(id); // its files as they are now, before acting on them
      check(id);
    }
    for (String id : List.copyOf(sampled)) {
      if (!due.contains(id)) {
        check(id);
      }
    }
    lastScanReads = reads + changes.takeReads();
    reads = 0;
    return sandboxCount;
  }

  /** Enforces sandbox {@code id}'s timers as they stand; then looks at its files again. */
  private void check(String id) {
    Watched w = watched.get(id);
    if (w == null || w.record == null || w.settings == null || !w.record.status().isUsable()) {
      return;
    }
    try {
      if (enforce(w.record, w.dir, w.settings)) {
        refresh(id); // it acted: ended, suspended or woke it
      } else if (!sampled.contains(id)) {
        schedule(w); // a deadline that was not due after all, or an idle one moved by activity
      }
    } catch (WorkspaceUnavailableException gone) {
      refresh(id); // destroyed meanwhile
    } catch (RuntimeException e) {
      say("cannot enforce the timers of local:" + id + ": " + e);
      schedule(w); // tried again at the next scan if still due
    }
  }

  /**
   * Reads sandbox {@code id}'s record and timers again (or forgets it: its directory is gone) and
   * schedules what its timers make due.
   */
  private void refresh(String id) {
    Path dir = engine.dir(id);
    changes.seen(id, dir); // watched from here on: a change while this reads is reported next time
    Watched w = watched.get(id);
    if (!Files.isDirectory(dir)) {
      if (w != null) {
        forget(id, w);
      }
      return;
    }
    if (w == null) {
      w = new Watched(dir);
      watched.put(id, w);
    }
    if (w.record != null) {
      sandboxCount--;
    }
    w.record = null;
    w.settings = null;
    reads += 3;
    if (!Files.exists(dir.resolve(Engine.PARKED))) { // a warm pool's member is no one's yet
      try {
        w.record = SandboxRecord.read(dir.resolve("state.json"));
        sandboxCount++;
      } catch (IOException e) {
        // being created or destroyed right now: its next write is reported
      }
      w.settings = Timers.read(dir).orElse(null);
    }
    schedule(w);
  }

  /** Forgets a sandbox whose directory is gone. */
  private void forget(String id, Watched w) {
    if (w.record != null) {
      sandboxCount--;
    }
    watched.remove(id);
    sampled.remove(id);
    cpu.remove(id);
    changes.forget(id);
  }

  /**
   * Puts sandbox {@code w}'s next due time in the queue (superseding the ones there): its deadline;
   * and for a running one with an idle timer, a look at every scan (its CPU use and commands make
   * it busy); for a suspended, stopped or hibernated one with an idle timeout, its last activity
   * plus that timeout.
   */
  private void schedule(Watched w) {
    w.generation++;
    String id = w.dir.getFileName().toString();
    Timers.Settings s = w.settings;
    boolean usable = w.record != null && w.record.status().isUsable();
    boolean running = usable && w.record.status() == SandboxRecord.Status.RUNNING;
    boolean idleTimed = s != null && (s.idleTimeoutMillis() > 0 || s.autoSuspendMillis() > 0);
    if (running && idleTimed) {
      sampled.add(id);
    } else {
      sampled.remove(id);
      cpu.remove(id);
    }
    if (s == null || !usable) {
      return; // no timers; or being created or destroyed: its record's next write is reported
    }
    Instant at = s.ends();
    if (!running && s.idleTimeoutMillis() > 0) {
      reads++;
      // a lower bound: activity only moves it later, which the look at that time finds
      Instant idleEnds = Timers.lastActivity(w.dir, Instant.parse(s.created())).plus(s.idle());
      if (idleEnds.isBefore(at)) {
        at = idleEnds;
      }
    }
    queue.add(new Due(at, id, w.generation));
  }

  /**
   * What the old every-sandbox scan did for one: returns whether it acted on it (ended, suspended,
   * woke it), which changed its files.
   */
  private boolean enforce(SandboxRecord record, Path dir, Timers.Settings s) {
    String id = record.id();
    Instant now = Instant.now();
    Optional<String> deadline = s.deadlinePassed(now);
    if (deadline.isPresent()) {
      end(id, deadline.get());
      return true;
    }
    boolean running = record.status() == SandboxRecord.Status.RUNNING;
    Boolean cpuBusy = running ? cpuBusy(id) : Boolean.FALSE;
    if (!running) {
      cpu.remove(id);
    }
    // A process that is runnable wants the CPU even when a loaded host gives it less than
    // BUSY_CPU: the sandboxes' parent has half a default peer's weight, and a CPU-bound sandbox
    // measured below 0.1 CPU for 3 s was suspended once in CI while the test JVMs were busy.
    if (commandRunning(id, dir) || Boolean.TRUE.equals(cpuBusy) || (running && runnable(id))) {
      Timers.touch(dir);
      return false;
    }
    if (cpuBusy == null) {
      return false; // first look at its CPU: judge from the next scan
    }
    reads++;
    Instant last = Timers.lastActivity(dir, Instant.parse(s.created()));
    Duration idle = Duration.between(last, now);
    if (s.idleTimeoutMillis() > 0 && idle.compareTo(s.idle()) >= 0) {
      end(id, "it was idle for its idleTimeout of " + Timers.human(s.idle()));
      return true;
    }
    if (s.autoSuspendMillis() > 0 && running && idle.compareTo(s.autoSuspend()) >= 0) {
      new Lifecycle(engine).suspend(id);
      cpu.remove(id);
      say("suspended local:" + id + ": idle for " + Timers.human(s.autoSuspend()));
      if (Timers.lastActivity(dir, last).isAfter(last)) {
        engine.attach(id); // an operation began while it was being suspended
        say("woke local:" + id + " again: it was used while being suspended");
      }
      return true;
    }
    return false;
  }

  private boolean runnable(String id) {
    reads++;
    return engine.cgroups().anyRunnable(id);
  }

  private void end(String id, String why) {
    Timers.end(engine, id, why);
    cpu.remove(id);
    say("ended local:" + id + ": " + why);
  }

  /** Whether a command the engine started (it has a pid file) still has processes. */
  private boolean commandRunning(String id, Path dir) {
    reads++;
    try (Stream<Path> files = Files.list(dir)) {
      return files
          .map(p -> p.getFileName().toString())
          .filter(n -> n.startsWith("cmd-") && n.endsWith(".pid"))
          .anyMatch(n -> engine.cgroups().isCommandRunning(id, n.substring(0, n.length() - 4)));
    } catch (IOException e) {
      return false;
    }
  }

  /** Whether the sandbox used more than {@link #BUSY_CPU} since the last scan; null at first. */
  private Boolean cpuBusy(String id) {
    reads++;
    OptionalLong usage = engine.cgroups().cpuUsageMicros(id);
    long at = System.nanoTime();
    if (usage.isEmpty()) {
      cpu.remove(id);
      return Boolean.FALSE;
    }
    CpuSample previous = cpu.put(id, new CpuSample(usage.getAsLong(), at));
    if (previous == null || at <= previous.atNanos()) {
      return null;
    }
    double cpus = (usage.getAsLong() - previous.usageMicros()) * 1000.0 / (at - previous.atNanos());
    return cpus > BUSY_CPU;
  }

  private static void say(String line) {
    OUT.println(Instant.now() + " " + line);
  }

  // ---- starting one ---------------------------------------------------------------------------

  /**
   * Starts the supervisor of {@code engine}'s state directory unless it runs or there is no sandbox
   * there. Never fails: a supervisor that cannot start is logged, and the next use of the engine
   * tries again.
   */
  public static void ensureRunning(Engine engine) {
    Path home = engine.home();
    try {
      if (!anySandboxes(home.resolve("sandboxes"))) {
        return;
      }
      Optional<FileLock> free = FileLock.tryAcquire(home.resolve(LOCK));
      if (free.isEmpty()) {
        long now = System.nanoTime();
        Long checked = CODE_CHECKED.get(home);
        if (checked == null || now - checked >= CODE_CHECK_INTERVAL_NANOS) {
          CODE_CHECKED.put(home, now);
          replaceIfItsCodeIsGone(engine); // one runs: from code that still exists?
        }
        return;
      }
      free.get().close();
      Long last = SPAWNED.get(home);
      if (last != null && System.nanoTime() - last < RESPAWN_GUARD_NANOS) {
        return; // started a moment ago, and not holding the lock yet
      }
      SPAWNED.put(home, System.nanoTime());
      spawn(home, engine.runtime().binary());
    } catch (IOException | RuntimeException e) {
      System.getLogger(Supervisor.class.getName())
          .log(System.Logger.Level.WARNING, "cannot start the supervisor of " + home, e);
    }
  }

  /**
   * Replaces the running supervisor of {@code engine}'s home if a jar it runs from is gone
   * (deleted: a {@code mvn clean}, an uninstalled version, a removed checkout): it can never be
   * started from that code again, and it keeps serving this process's sandboxes with code older
   * than this process's, whose files and protocols may have changed since. A supervisor whose jars
   * were only rewritten hands over by itself ({@link CodeWatch}); one running from jars that all
   * exist is left alone, whatever its version, so that two versions using one home never take
   * turns. {@link #ensureRunning} looks at most every few seconds per home. Never fails (logs).
   */
  public static void replaceIfItsCodeIsGone(Engine engine) {
    Path home = engine.home();
    try {
      List<String> lines;
      try {
        lines = Files.readAllLines(home.resolve(CODE_FILE), StandardCharsets.UTF_8);
      } catch (NoSuchFileException e) {
        return; // one from before this file existed, or one just starting
      }
      if (lines.size() < 2 || !lines.get(0).matches("[0-9]{1,10}")) {
        return;
      }
      Optional<ProcessHandle> running = ProcessHandle.of(Long.parseLong(lines.get(0)));
      if (running.isEmpty() || !isSupervisorOf(running.get(), home)) {
        return; // the file outlived it (a pid reused by another process is never touched)
      }
      List<String> gone = missingJars(lines.get(1));
      if (gone.isEmpty() || !missingJars(classPath()).isEmpty()) {
        return; // its code is there; or this process's is not, and it could start nothing better
      }
      System.getLogger(Supervisor.class.getName())
          .log(
              System.Logger.Level.WARNING,
              "the supervisor of "
                  + home
                  + " (pid "
                  + running.get().pid()
                  + ") runs from jars that are gone ("
                  + String.join(", ", gone)
                  + "): replacing it with one from this process's code");
      running.get().destroy();
      long end = System.nanoTime() + 10_000_000_000L;
      while (System.nanoTime() < end) {
        Optional<FileLock> free = FileLock.tryAcquire(home.resolve(LOCK));
        if (free.isPresent()) {
          free.get().close();
          SPAWNED.put(home, System.nanoTime());
          spawn(home, engine.runtime().binary());
          return;
        }
        Thread.sleep(50);
      }
      System.getLogger(Supervisor.class.getName())
          .log(
              System.Logger.Level.WARNING,
              "the supervisor of " + home + " did not exit within 10 s of SIGTERM; left to run");
    } catch (IOException | RuntimeException e) {
      System.getLogger(Supervisor.class.getName())
          .log(System.Logger.Level.WARNING, "cannot check the supervisor of " + home, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Whether {@code p} is a runtime supervisor of {@code home}, by its command line. */
  private static boolean isSupervisorOf(ProcessHandle p, Path home) {
    List<String> argv =
        p.info().arguments().map(List::of).orElse(List.of()); // null-free: the JDK's own list
    int main = argv.indexOf(Supervisor.class.getName());
    return main >= 0 && main + 1 < argv.size() && argv.get(main + 1).equals(home.toString());
  }

  /** The jars of {@code classPath} that do not exist (class directories are not looked at). */
  private static List<String> missingJars(String classPath) {
    List<String> gone = new java.util.ArrayList<>();
    for (String entry : classPath.split(File.pathSeparator)) {
      if (entry.endsWith(".jar") && !Files.exists(Path.of(entry))) {
        gone.add(entry);
      }
    }
    return gone;
  }

  /** Whether a supervisor holds the lock of {@code home} (it runs). */
  public static boolean isRunning(Path home) {
    try {
      Optional<FileLock> free = FileLock.tryAcquire(home.resolve(LOCK));
      if (free.isEmpty()) {
        return true;
      }
      free.get().close();
      return false;
    } catch (IOException e) {
      return false;
    }
  }

  /** Whether there is any sandbox directory (with a record) under {@code sandboxes}. */
  static boolean anySandboxes(Path sandboxes) throws IOException {
    if (!Files.isDirectory(sandboxes)) {
      return false;
    }
    try (Stream<Path> dirs = Files.list(sandboxes)) {
      return dirs.anyMatch(
          d ->
              !d.getFileName().toString().startsWith(".")
                  && Files.isRegularFile(d.resolve("state.json")));
    }
  }

  /** The supervisor's process, in a session of its own. */
  public static Process spawn(Path home, Path runtime) throws IOException {
    return spawnJava(
        home,
        classPath(),
        Supervisor.class.getName(),
        List.of(home.toString(), runtime.toString()));
  }

  /**
   * A supervisor process of any backend: {@code setsid java -cp classPath mainClass args...} with a
   * small heap, stdin from {@code /dev/null}, stdout and stderr appended to {@code home}'s {@link
   * #LOG_FILE} (0600; rotated once past 1 MiB), in a session of its own so that it outlives this
   * JVM.
   */
  public static Process spawnJava(Path home, String classPath, String mainClass, List<String> args)
      throws IOException {
    Path log = home.resolve(LOG_FILE);
    if (Files.exists(log) && Files.size(log) > LOG_MAX_BYTES) {
      Files.move(log, home.resolve(LOG_FILE + ".1"), StandardCopyOption.REPLACE_EXISTING);
    }
    if (!Files.exists(log)) {
      PrivateFiles.createPrivateFile(log); // appendTo would make it 0644
    }
    List<String> argv =
        new java.util.ArrayList<>(
            List.of(
                "setsid",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx64m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dfile.encoding=UTF-8",
                "-Dsun.jnu.encoding=UTF-8",
                "--enable-native-access=ALL-UNNAMED",
                "-cp",
                classPath,
                mainClass));
    argv.addAll(args);
    return new ProcessBuilder(argv)
        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
        .redirectErrorStream(true)
        .start();
  }

  /** Where this runtime and its dependencies were loaded from (one jar when shaded). */
  static String classPath() {
    return classPath(List.of());
  }

  /**
   * {@link #classPath()} with the jars (or class directories) of {@code more} too: what another
   * backend's supervisor process runs from (its own module, besides this runtime).
   */
  public static String classPath(List<Class<?>> more) {
    Set<String> entries = new LinkedHashSet<>();
    for (Class<?> c : more) {
      addSource(entries, c);
    }
    for (Class<?> c :
        List.of(
            Supervisor.class,
            WorkspaceException.class,
            ObjectMapper.class,
            com.fasterxml.jackson.core.JsonFactory.class,
            com.fasterxml.jackson.annotation.JsonProperty.class)) {
      addSource(entries, c);
    }
    // BouncyCastle (the egress proxy's TLS interception), where it is on this class path.
    for (String name :
        List.of(
            "org.bouncycastle.jce.provider.BouncyCastleProvider",
            "org.bouncycastle.cert.X509v3CertificateBuilder",
            "org.bouncycastle.asn1.cms.ContentInfo")) {
      try {
        addSource(entries, Class.forName(name, false, Supervisor.class.getClassLoader()));
      } catch (ClassNotFoundException | LinkageError e) {
        // not here: interception then fails with a clear error in the supervisor's log
      }
    }
    return String.join(File.pathSeparator, entries);
  }

  private static void addSource(Set<String> entries, Class<?> c) {
    CodeSource source = c.getProtectionDomain().getCodeSource();
    if (source != null && source.getLocation() != null) {
      try {
        entries.add(Path.of(source.getLocation().toURI()).toString());
      } catch (URISyntaxException | IllegalArgumentException e) {
        // not a file: cannot be passed on
      }
    }
  }
}
