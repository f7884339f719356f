package dev.sandbox4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Issue 18, target 4: how many idle sandboxes one host holds, and what each costs it. Creates
 * sandboxes of the local engine (crun, the default image, a private home) up to {@code --count},
 * each running {@code true} once and then left idle, and at each sample point ({@code --step})
 * counts what the host holds ({@link HostCensus}), measures the home's supervisor's CPU over a
 * window, times the engine's {@code list()} and the CLI's {@code sandbox4j ls}, then times {@code
 * --samples} creates (kept) and as many execs of {@code true} in sandboxes picked at random. It
 * stops creating at the first limit it meets (a create that fails, MemAvailable under {@code
 * --min-available}, the host's tasks over {@code --max-pids} of {@code pid_max}, the bench's
 * descriptors near its limit) and reports that limit's message. At the end — normally, on a
 * failure, or on Ctrl-C — it destroys every sandbox it made and checks that the host is back: no
 * cgroup, mount, loop device, network namespace or veth of its sandboxes left. Creating {@code
 * HOME/density.stop} stops the creates as a limit would, and the run reports what it reached.
 *
 * <pre>bench/density [--count N] [--step LIST] [--samples N] [--home DIR] [--concurrency 1|2]
 *               [--disk-overcommit F|default] [--supervisor-window SECONDS] [--out FILE]</pre>
 *
 * <p>The engine gives every sandbox a network namespace with a routed veth (no bridge, so no 1024
 * ports limit); it has no mode without one ({@code EgressPolicy.none()} still gets its veth, and
 * rejects everything), so there is no {@code --network} option.
 */
public final class DensityBench {

  static final int DEFAULT_COUNT = 10_000;
  static final List<Integer> DEFAULT_STEPS = List.of(0, 1000, 2000, 5000, 10_000);
  static final int DEFAULT_SAMPLES = 50;
  static final Path DEFAULT_HOME = Path.of("/var/tmp/sandbox4j-density");
  static final Duration DEFAULT_SUPERVISOR_WINDOW = Duration.ofSeconds(30);
  static final long DEFAULT_MIN_AVAILABLE = 4L << 30;
  static final double DEFAULT_MAX_PIDS = 0.8;
  static final int CLI_LS_RUNS = 5;
  static final int LIST_RUNS = 5;
  static final int WARMUP = 5;

  /**
   * A file in the home whose existence stops the creates: the run then measures where it is,
   * reports and cleans up, as at a limit (Ctrl-C cleans up without a report).
   */
  static final String STOP_FILE = "density.stop";

  /** Clock ticks per second of /proc/PID/stat: USER_HZ, 100 on every Linux architecture we run. */
  static final int USER_HZ = 100;

  private static final Command TRUE = Command.argv("true");
  private static final Path DEFAULT_IMAGES = Path.of("/var/lib/sandbox4j/images");

  static final String USAGE =
      """
      usage: bench/density [--count N] [--step LIST] [--samples N] [--home DIR] [--concurrency 1|2]
                           [--disk-overcommit F|default] [--supervisor-window SECONDS]
                           [--min-available GIB] [--max-pids FRACTION] [--out FILE]
        --count N              idle sandboxes to reach (default %d)
        --step LIST            sample points, comma-separated counts (default %s; clipped to --count)
        --samples N            timed creates (kept) and execs per sample point (default %d)
        --home DIR             a private SANDBOX4J_HOME (default %s; never /var/lib/sandbox4j);
                               its images are copied from /var/lib/sandbox4j/images if it has none
        --concurrency 1|2      creates in flight between sample points (default 2; timed ones: 1)
        --disk-overcommit F    the engine's disk budget (default inf: none; 'default': the
                               engine's own, 4, which limits a home to a few dozen 10 GiB disks)
        --supervisor-window S  seconds the supervisor's CPU is measured over (default %d)
        --min-available GIB    stop below this MemAvailable (default 4)
        --max-pids FRACTION    stop above this share of pid_max in use (default 0.8)
        --out FILE             JSON report (default bench/results/density-<UTC timestamp>.json)
      """
          .formatted(
              DEFAULT_COUNT,
              DEFAULT_STEPS.stream().map(String::valueOf).reduce((a, b) -> a + "," + b).orElse(""),
              DEFAULT_SAMPLES,
              DEFAULT_HOME,
              DEFAULT_SUPERVISOR_WINDOW.toSeconds());

  /** Parsed command line; {@code diskOvercommit} null means the engine's default. */
  record Options(
      int count,
      List<Integer> steps,
      int samples,
      Path home,
      int concurrency,
      Double diskOvercommit,
      Duration supervisorWindow,
      long minAvailableBytes,
      double maxPidsFraction,
      Path out) {}

  /** What one sample point measured. */
  record Point(
      int sandboxes,
      Instant at,
      double loadAverage,
      HostCensus census,
      HostCensus.Own own,
      HostCensus.ProcessFigures supervisor,
      Double supervisorCpuPercent,
      Stats engineList,
      Stats cliLs,
      Stats create,
      Stats exec) {

    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("sandboxes", sandboxes);
      m.put("at", at.toString());
      m.put("load_average_1m", loadAverage);
      m.put("supervisor", supervisor == null ? null : supervisor.toJson());
      m.put("supervisor_cpu_percent_of_a_core", supervisorCpuPercent);
      m.put("engine_list", engineList == null ? null : Report.scenario(engineList));
      m.put("cli_ls", cliLs == null ? null : Report.scenario(cliLs));
      m.put("create_true", create == null ? null : Report.scenario(create));
      m.put("exec_true", exec == null ? null : Report.scenario(exec));
      m.put("own", own.toJson());
      m.put("host", census.toJson());
      return m;
    }
  }

  private final Options options;
  private final LocalTarget target;
  private final LocalSandbox engine;
  private final WorkspaceProvider provider;
  private final Path cli;
  private final SplittableRandom random = new SplittableRandom();
  private final List<WorkspaceRef> refs = Collections.synchronizedList(new ArrayList<>());
  private final Set<String> ids = ConcurrentHashMap.newKeySet();
  private final AtomicReference<String> limit = new AtomicReference<>();
  private final PrintStream out = System.out;
  private final long nofileLimit;
  private String netnsPrefix;

  private DensityBench(Options options, LocalTarget target, Path cli) throws IOException {
    this.options = options;
    this.target = target;
    this.engine = target.engine();
    this.provider = target.provider();
    this.cli = cli;
    this.nofileLimit = nofileSoftLimit();
  }

  public static void main(String[] args) {
    java.util.logging.Logger.getLogger("dev.sandbox4j.runtime")
        .setLevel(java.util.logging.Level.WARNING);
    if (List.of(args).contains("--help") || List.of(args).contains("-h")) {
      System.out.print(USAGE);
      return;
    }
    Options options;
    try {
      options = parseArgs(args, Instant.now());
    } catch (IllegalArgumentException e) {
      System.err.println("density: " + e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }
    try {
      run(options);
    } catch (Exception e) {
      System.err.println("density: failed: " + e);
      e.printStackTrace();
      System.exit(1);
    }
  }

  static void run(Options options) throws Exception {
    if (!"root".equals(System.getProperty("user.name"))) {
      throw new IllegalStateException("the local engine needs root");
    }
    prepareHome(options.home());
    Files.deleteIfExists(options.home().resolve(STOP_FILE));
    Path cli = Path.of(System.getProperty("sandbox4j.cli", "sandbox4j"));
    LocalTarget target =
        LocalTarget.create(
            Isolation.CONTAINER,
            b -> {
              b.home(options.home());
              if (options.diskOvercommit() != null) {
                b.diskOvercommit(options.diskOvercommit());
              }
              return b;
            });
    DensityBench bench = new DensityBench(options, target, cli);
    Thread cleanupOnSignal =
        new Thread(
            () -> {
              bench.limit.compareAndSet(null, "stopped by a signal");
              target.close();
            });
    Runtime.getRuntime().addShutdownHook(cleanupOnSignal);
    try {
      bench.measure();
    } finally {
      try {
        Runtime.getRuntime().removeShutdownHook(cleanupOnSignal);
      } catch (IllegalStateException shuttingDown) {
        // the hook is running: it destroys what is left
      }
      target.close();
    }
  }

  /**
   * Makes the private home (0700) and copies the default images into it, so that no create waits
   * for an image build. Refuses the shared default home: this bench destroys only its own
   * sandboxes, but fills and measures the whole home.
   */
  static void prepareHome(Path home) throws IOException, InterruptedException {
    Path normalized = home.toAbsolutePath().normalize();
    if (normalized.equals(LocalSandbox.DEFAULT_HOME)) {
      throw new IllegalArgumentException(
          "--home must be a private directory, not the default " + LocalSandbox.DEFAULT_HOME);
    }
    Files.createDirectories(normalized);
    Files.setPosixFilePermissions(
        normalized, java.nio.file.attribute.PosixFilePermissions.fromString("rwx------"));
    if (!Files.exists(normalized.resolve("images")) && Files.isDirectory(DEFAULT_IMAGES)) {
      System.err.println("density: copying " + DEFAULT_IMAGES + " into " + normalized + "...");
      Process cp =
          new ProcessBuilder("cp", "-a", DEFAULT_IMAGES.toString(), normalized.toString())
              .inheritIO()
              .start();
      if (cp.waitFor() != 0) {
        throw new IOException("cp -a " + DEFAULT_IMAGES + " " + normalized + " failed");
      }
    }
  }

  // ---- the run ----

  private void measure() throws Exception {
    Instant started = Instant.now();
    Double loadAtStart = Report.loadAverage();
    List<Integer> steps = options.steps();
    out.printf(
        "sandbox4j density: up to %d idle sandboxes in %s, sample points %s, %d samples each%n",
        options.count(), engine.home(), steps, options.samples());
    warmUp();
    List<Point> points = new ArrayList<>();
    HostCensus before = HostCensus.take();
    HostCensus.ProcessFigures benchBefore = HostCensus.process(ProcessHandle.current().pid());
    out.println(DensityReport.Row.HEADER);
    Instant fillStarted = Instant.now();
    for (int step : steps) {
      fill(step);
      if (limit.get() != null) {
        break;
      }
      Point p = samplePoint();
      points.add(p);
      out.println(DensityReport.Row.of(p));
    }
    Duration fillTime = Duration.between(fillStarted, Instant.now());
    Point last = null;
    if (limit.get() != null && !refs.isEmpty()) {
      System.err.printf("density: limit reached at %d sandboxes: %s%n", refs.size(), limit.get());
      last = idlePoint();
      points.add(last);
      out.println(DensityReport.Row.of(last));
    } else if (!points.isEmpty()) {
      last = points.getLast();
    }
    HostCensus.ProcessFigures benchAfter = HostCensus.process(ProcessHandle.current().pid());
    HostCensus atMost = last == null ? before : last.census();
    int reached = last == null ? 0 : last.sandboxes();
    String hashedPrefix = hostNamePrefix();

    System.err.printf("density: destroying %d sandboxes...%n", refs.size());
    Stats destroy = destroyAll();
    DensityReport.Teardown teardown =
        DensityReport.Teardown.check(engine.home(), ids, hashedPrefix);
    HostCensus after = HostCensus.take();

    DensityReport.PerSandbox per =
        DensityReport.PerSandbox.of(before, atMost, reached, benchBefore, benchAfter, last);
    out.println();
    per.rows().forEach(out::println);
    out.printf(
        "limit: %s%n",
        limit.get() == null ? "none up to " + refs.size() + " sandboxes" : limit.get());
    out.printf(
        "destroy: %d sandboxes, p50 %.1f ms, p99 %.1f ms%n",
        destroy == null ? 0 : destroy.n(),
        destroy == null ? 0 : destroy.p50(),
        destroy == null ? 0 : destroy.p99());
    out.println("teardown: " + (teardown.clean() ? "clean" : "LEFT " + teardown.leftovers()));

    Map<String, Object> report = new LinkedHashMap<>();
    report.put("benchmark", "density");
    report.put("date", started.toString());
    report.put("machine", Report.machine());
    report.put("load_average_1m_start", loadAtStart);
    report.put("load_average_1m_end", Report.loadAverage());
    report.put("details", target.details());
    report.put("options", optionsJson());
    report.put("limit", limit.get());
    report.put("sandboxes_created", refs.size());
    report.put("fill_seconds", fillTime.toSeconds());
    report.put("per_sandbox", per.toJson());
    report.put("points", points.stream().map(Point::toJson).toList());
    report.put("destroy", destroy == null ? null : Report.scenario(destroy));
    report.put("teardown", teardown.toJson());
    report.put("host_before", before.toJson());
    report.put("host_after", after.toJson());
    Path file = options.out().toAbsolutePath();
    Files.createDirectories(file.getParent());
    new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(file.toFile(), report);
    out.println("wrote " + file);
    if (!teardown.clean()) {
      throw new IllegalStateException("the host is not back: " + teardown.leftovers());
    }
  }

  /**
   * Creates and destroys {@value #WARMUP} sandboxes, untimed, before anything is measured: the
   * first creates of a JVM make the disk template and spare disks and load the engine's classes.
   */
  private void warmUp() {
    System.err.printf("density: warming up (%d sandboxes, destroyed)...%n", WARMUP);
    for (int i = 0; i < WARMUP; i++) {
      Workspace ws = Workspace.of(provider.newBackend());
      check(ws.run(TRUE));
      engine.destroy(ws.open());
    }
  }

  /** Creates untimed idle sandboxes until there are {@code target}, or a limit is met. */
  private void fill(int targetCount) throws Exception {
    int missing = targetCount - refs.size();
    if (missing <= 0) {
      return;
    }
    System.err.printf("density: creating %d sandboxes (to %d)...%n", missing, targetCount);
    onWorkers(
        () -> {
          while (limit.get() == null && claimSlot(targetCount)) {
            createIdle();
          }
          return null;
        });
  }

  /** Runs {@code work} on {@code --concurrency} threads at once and waits for them all. */
  private void onWorkers(java.util.concurrent.Callable<Void> work) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(options.concurrency());
    try {
      List<Future<?>> workers = new ArrayList<>();
      for (int w = 0; w < options.concurrency(); w++) {
        workers.add(pool.submit(work));
      }
      for (Future<?> w : workers) {
        w.get();
      }
    } finally {
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.MINUTES);
    }
  }

  private int inFlight;

  /** Whether another create fits under {@code targetCount} (counting those in flight). */
  private synchronized boolean claimSlot(int targetCount) {
    if (refs.size() + inFlight >= targetCount) {
      return false;
    }
    inFlight++;
    return true;
  }

  private synchronized void releaseSlot() {
    inFlight--;
  }

  /** One idle sandbox: created, {@code true} run once, then left alone. Returns its create time. */
  private long createIdle() {
    try {
      String stop = safetyLimit();
      if (stop != null) {
        limit.compareAndSet(null, stop);
        return -1;
      }
      long start = System.nanoTime();
      Workspace ws;
      try {
        ws = Workspace.of(provider.newBackend());
        check(ws.run(TRUE));
      } catch (RuntimeException e) {
        limit.compareAndSet(null, "create #" + (refs.size() + 1) + " failed: " + message(e));
        return -1;
      }
      long nanos = System.nanoTime() - start;
      WorkspaceRef ref = ws.open();
      ids.add(ref.id());
      refs.add(ref);
      int n = refs.size();
      if (n % 500 == 0) {
        System.err.printf("density: %d sandboxes%n", n);
      }
      return nanos;
    } finally {
      releaseSlot();
    }
  }

  /** The host limit this bench will not cross, or null while none is near. */
  private String safetyLimit() {
    if (Files.exists(engine.home().resolve(STOP_FILE))) {
      return "stopped by the operator (" + engine.home().resolve(STOP_FILE) + " exists)";
    }
    try {
      long available = HostCensus.memAvailable();
      if (available < options.minAvailableBytes()) {
        return String.format(
            Locale.ROOT,
            "MemAvailable %.2f GiB is under the --min-available %.2f GiB",
            available / (double) (1L << 30),
            options.minAvailableBytes() / (double) (1L << 30));
      }
      long threads = HostCensus.tasksInUse();
      long pidMax = HostCensus.procLong("/proc/sys/kernel/pid_max");
      if (threads > options.maxPidsFraction() * pidMax) {
        return String.format(
            Locale.ROOT,
            "%d tasks (processes and threads) in use, over %.0f%% of pid_max %d",
            threads,
            options.maxPidsFraction() * 100,
            pidMax);
      }
      if (refs.size() % 100 == 0) {
        int fds = HostCensus.countEntries(Path.of("/proc/self/fd"));
        if (fds > 0.8 * nofileLimit) {
          return "the bench holds " + fds + " descriptors, over 80% of its limit " + nofileLimit;
        }
      }
      return null;
    } catch (IOException e) {
      return "cannot read the host's figures: " + e;
    }
  }

  /** Measures one sample point: the idle figures, then timed creates and execs. */
  private Point samplePoint() throws Exception {
    Point idle = idlePoint();
    int n = options.samples();
    long[] creates = new long[n];
    int made = 0;
    for (int i = 0; i < n && limit.get() == null; i++) {
      synchronized (this) {
        inFlight++;
      }
      long nanos = createIdle();
      if (nanos < 0) {
        break;
      }
      creates[made++] = nanos;
    }
    long[] execs = new long[n];
    List<WorkspaceRef> all;
    synchronized (refs) {
      all = List.copyOf(refs);
    }
    for (int i = 0; i < n && !all.isEmpty(); i++) {
      WorkspaceRef ref = all.get(random.nextInt(all.size()));
      WorkspaceBackend backend =
          provider
              .backend(ref)
              .orElseThrow(() -> new IllegalStateException("sandbox " + ref + " is gone"));
      Workspace ws = Workspace.of(backend);
      check(ws.run(TRUE)); // untimed: attaching to the sandbox
      long start = System.nanoTime();
      check(ws.run(TRUE));
      execs[i] = System.nanoTime() - start;
    }
    return new Point(
        idle.sandboxes(),
        idle.at(),
        idle.loadAverage(),
        idle.census(),
        idle.own(),
        idle.supervisor(),
        idle.supervisorCpuPercent(),
        idle.engineList(),
        idle.cliLs(),
        made == 0 ? null : Stats.ofNanos(java.util.Arrays.copyOf(creates, made)),
        all.isEmpty() ? null : Stats.ofNanos(execs));
  }

  /** The figures of the idle home: census, supervisor CPU, list() and `sandbox4j ls`. */
  private Point idlePoint() throws Exception {
    int count = refs.size();
    System.err.printf("density: sample point at %d sandboxes...%n", count);
    Instant at = Instant.now();
    double load = Report.loadAverage() == null ? -1 : Report.loadAverage();
    Long supervisorPid = supervisorPid();
    Double cpu = null;
    HostCensus.ProcessFigures supervisor = null;
    if (supervisorPid != null && count > 0) {
      long ticks = HostCensus.cpuTicks(supervisorPid);
      long start = System.nanoTime();
      Thread.sleep(options.supervisorWindow());
      HostCensus.ProcessFigures now = HostCensus.process(supervisorPid);
      if (now != null) {
        double seconds = (System.nanoTime() - start) / 1e9;
        cpu = 100.0 * (now.cpuTicks() - ticks) / USER_HZ / seconds;
        supervisor = now;
      }
    }
    HostCensus census = HostCensus.take();
    long[] lists = new long[LIST_RUNS];
    for (int i = 0; i < LIST_RUNS; i++) {
      long start = System.nanoTime();
      int listed = engine.list().size();
      lists[i] = System.nanoTime() - start;
      if (listed < count) {
        throw new IllegalStateException("list() gave " + listed + " sandboxes, not " + count);
      }
    }
    Stats cliLs = cliLs(count);
    HostCensus.Own own = HostCensus.Own.take(engine.home(), ids, hostNamePrefix());
    return new Point(
        count, at, load, census, own, supervisor, cpu, Stats.ofNanos(lists), cliLs, null, null);
  }

  /**
   * {@code sandbox4j ls} with SANDBOX4J_HOME = the bench's home, as whole processes: one untimed
   * run (it may start the CLI's resident process), then {@value #CLI_LS_RUNS} timed ones; each must
   * exit 0 and print at least {@code count} lines. Null without the CLI.
   */
  private Stats cliLs(int count) throws IOException, InterruptedException {
    if (!Files.isExecutable(cli)) {
      System.err.println("density: no CLI at " + cli + ": `sandbox4j ls` not timed");
      return null;
    }
    long[] nanos = new long[CLI_LS_RUNS];
    for (int i = -1; i < CLI_LS_RUNS; i++) {
      ProcessBuilder pb = new ProcessBuilder(cli.toString(), "ls");
      pb.environment().put("SANDBOX4J_HOME", engine.home().toString());
      pb.redirectError(ProcessBuilder.Redirect.DISCARD);
      long start = System.nanoTime();
      Process p = pb.start();
      long lines;
      try (var reader = p.inputReader(StandardCharsets.UTF_8)) {
        lines = reader.lines().count();
      }
      int exit = p.waitFor();
      long elapsed = System.nanoTime() - start;
      if (exit != 0 || lines < count) {
        throw new IllegalStateException(
            "`sandbox4j ls` exited " + exit + " after " + lines + " lines, with " + count);
      }
      if (i >= 0) {
        nanos[i] = elapsed;
      }
    }
    return Stats.ofNanos(nanos);
  }

  /** The pid of the home's supervisor (first line of its supervisor.code), if it runs. */
  private Long supervisorPid() {
    Path code = engine.home().resolve("supervisor.code");
    try {
      long pid = Long.parseLong(Files.readAllLines(code).getFirst().strip());
      return ProcessHandle.of(pid).filter(ProcessHandle::isAlive).isPresent() ? pid : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * The prefix that the host names of this home's sandboxes share ({@code s4j-<hash>-} of the
   * network namespaces), read from one sandbox's namespace, or null if none is seen.
   */
  private String hostNamePrefix() throws IOException {
    if (netnsPrefix != null) {
      return netnsPrefix;
    }
    for (String name : HostCensus.entriesStartingWith(Path.of("/run/netns"), "s4j-")) {
      for (String id : ids) {
        if (name.endsWith("-" + id)) {
          netnsPrefix = name.substring(0, name.length() - id.length());
          return netnsPrefix;
        }
      }
    }
    return null;
  }

  /** Destroys every sandbox made, {@code --concurrency} at a time; null if there were none. */
  private Stats destroyAll() throws Exception {
    List<WorkspaceRef> all;
    synchronized (refs) {
      all = List.copyOf(refs);
    }
    if (all.isEmpty()) {
      return null;
    }
    long[] nanos = new long[all.size()];
    java.util.concurrent.atomic.AtomicInteger next =
        new java.util.concurrent.atomic.AtomicInteger();
    onWorkers(
        () -> {
          for (int i = next.getAndIncrement(); i < all.size(); i = next.getAndIncrement()) {
            long start = System.nanoTime();
            try {
              engine.destroy(all.get(i));
            } catch (RuntimeException e) {
              System.err.println("density: destroy " + all.get(i) + " failed: " + e);
            }
            nanos[i] = System.nanoTime() - start;
            if ((i + 1) % 1000 == 0) {
              System.err.printf("density: %d destroyed%n", i + 1);
            }
          }
          return null;
        });
    engine.close();
    return Stats.ofNanos(nanos);
  }

  private Map<String, Object> optionsJson() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("count", options.count());
    m.put("steps", options.steps());
    m.put("samples", options.samples());
    m.put("home", options.home().toString());
    m.put("concurrency", options.concurrency());
    m.put(
        "disk_overcommit",
        options.diskOvercommit() == null ? "engine default" : options.diskOvercommit());
    m.put("supervisor_window_s", options.supervisorWindow().toSeconds());
    m.put("min_available_bytes", options.minAvailableBytes());
    m.put("max_pids_fraction", options.maxPidsFraction());
    m.put("first_command", TRUE.toArgv());
    return m;
  }

  private static void check(CommandResult r) {
    if (!r.succeeded()) {
      throw new IllegalStateException("`true` exited " + r.exitCode() + " in a sandbox");
    }
  }

  private static String message(Throwable e) {
    StringBuilder m = new StringBuilder(e.getClass().getSimpleName() + ": " + e.getMessage());
    for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
      m.append(" <- ").append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
    }
    return m.toString();
  }

  /** The soft RLIMIT_NOFILE of this JVM ("Max open files" of /proc/self/limits). */
  private static long nofileSoftLimit() throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
      if (line.startsWith("Max open files")) {
        String soft = line.substring("Max open files".length()).strip().split("\\s+")[0];
        return soft.equals("unlimited") ? Long.MAX_VALUE : Long.parseLong(soft);
      }
    }
    return Long.MAX_VALUE;
  }

  // ---- command line ----

  static Options parseArgs(String[] args, Instant now) {
    int count = DEFAULT_COUNT;
    List<Integer> steps = null;
    int samples = DEFAULT_SAMPLES;
    Path home = DEFAULT_HOME;
    int concurrency = 2;
    Double overcommit = Double.POSITIVE_INFINITY;
    Duration window = DEFAULT_SUPERVISOR_WINDOW;
    long minAvailable = DEFAULT_MIN_AVAILABLE;
    double maxPids = DEFAULT_MAX_PIDS;
    Path out = null;
    for (int i = 0; i < args.length; i++) {
      String option = args[i];
      if (i + 1 == args.length) {
        throw new IllegalArgumentException(option + " needs a value");
      }
      String value = args[++i];
      switch (option) {
        case "--count" -> count = positive(option, value);
        case "--step" -> steps = steps(value);
        case "--samples" -> samples = positive(option, value);
        case "--home" -> home = Path.of(value);
        case "--concurrency" -> {
          concurrency = positive(option, value);
          if (concurrency > 2) {
            throw new IllegalArgumentException(
                "--concurrency is 1 or 2 (the machine is shared), got " + value);
          }
        }
        case "--disk-overcommit" ->
            overcommit =
                value.equals("default")
                    ? null
                    : value.equals("inf") ? Double.POSITIVE_INFINITY : number(option, value);
        case "--supervisor-window" -> window = Duration.ofSeconds(positive(option, value));
        case "--min-available" -> minAvailable = (long) (number(option, value) * (1L << 30));
        case "--max-pids" -> {
          maxPids = number(option, value);
          if (maxPids <= 0 || maxPids > 1) {
            throw new IllegalArgumentException(
                "--max-pids is a fraction of pid_max in (0, 1], got " + value);
          }
        }
        case "--out" -> out = Path.of(value);
        default -> throw new IllegalArgumentException("unknown argument '" + option + "'");
      }
    }
    if (home.toAbsolutePath().normalize().equals(LocalSandbox.DEFAULT_HOME)) {
      throw new IllegalArgumentException(
          "--home must be a private directory, not the default " + LocalSandbox.DEFAULT_HOME);
    }
    TreeSet<Integer> points = new TreeSet<>();
    for (int s : steps == null ? DEFAULT_STEPS : steps) {
      points.add(Math.min(s, count));
    }
    points.add(count);
    if (out == null) {
      out =
          WorkspaceBench.defaultResultsDir()
              .resolve("density-" + WorkspaceBench.timestamp(now) + ".json");
    }
    return new Options(
        count,
        List.copyOf(points),
        samples,
        home,
        concurrency,
        overcommit,
        window,
        minAvailable,
        maxPids,
        out);
  }

  private static List<Integer> steps(String value) {
    List<Integer> steps = new ArrayList<>();
    for (String s : value.split(",")) {
      try {
        int n = Integer.parseInt(s.strip());
        if (n < 0) {
          throw new NumberFormatException();
        }
        steps.add(n);
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--step needs comma-separated counts (0 or more), got '" + value + "'");
      }
    }
    return steps;
  }

  private static int positive(String option, String value) {
    try {
      int n = Integer.parseInt(value);
      if (n < 1) {
        throw new NumberFormatException();
      }
      return n;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          option + " needs a whole number of 1 or more, got '" + value + "'");
    }
  }

  private static double number(String option, String value) {
    try {
      double d = Double.parseDouble(value);
      if (!(d > 0)) {
        throw new NumberFormatException();
      }
      return d;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(option + " needs a number above 0, got '" + value + "'");
    }
  }
}
