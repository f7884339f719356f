package dev.sandbox4j.bench;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * Latency benchmark of a workspace provider: creating a workspace and running its first command,
 * running a command, writing and reading 1 MiB, destroying, and 20 creations at once; for sandbox
 * providers also the host memory an idle sandbox holds ({@link IdleMemory}). Prints p50/p95/p99/max
 * per scenario and writes every sample to a JSON report. Run it with {@code bench/run}; see {@code
 * bench/README.md}.
 */
public final class WorkspaceBench implements AutoCloseable {

  /**
   * The providers the bench knows, by name, each built over a fresh scratch directory that is
   * deleted when the bench ends. Add a provider here (and nowhere else).
   */
  static final Map<String, Function<Path, Target>> PROVIDERS =
      Map.of(
          "host",
          Target::host,
          "local",
          scratch -> LocalTarget.create(),
          "gvisor",
          scratch -> LocalTarget.create(dev.sandbox4j.runtime.Isolation.GVISOR),
          "remote",
          RemoteTarget::create,
          "docker",
          scratch -> DockerTarget.create());

  static final int DEFAULT_ITERATIONS = 200;
  static final int MIN_ITERATIONS = 100;
  static final int DEFAULT_WARMUP = 20;
  static final int CONCURRENCY = 20;
  static final int BLOB_BYTES = 1024 * 1024;

  /**
   * The engine logs a line per sandbox created at INFO; the bench keeps its stderr to progress and
   * problems (and keeps console logging out of the timings). A strong reference: JUL loggers are
   * otherwise collected, and their level with them.
   */
  private static final java.util.logging.Logger ENGINE_LOG =
      java.util.logging.Logger.getLogger("dev.sandbox4j.runtime");

  static final String USAGE =
      """
      usage: bench/run [--provider NAME] [--iterations N] [--warmup N] [--out FILE] [--only LIST]
        --provider NAME   workspace provider to measure (known: %s; default host)
        --iterations N    measured iterations per scenario, at least %d (default %d)
        --warmup N        uncounted iterations run first (default %d)
        --out FILE        JSON report (default bench/results/<provider>-<UTC timestamp>.json)
        --only LIST       comma-separated scenarios to run (default: all)
      """
          .formatted(knownProviders(), MIN_ITERATIONS, DEFAULT_ITERATIONS, DEFAULT_WARMUP);

  private static final Command TRUE = Command.argv("true");

  /** Set by the shutdown hook: a failure from then on is the cleanup's doing, not a finding. */
  private static volatile boolean stopping;

  /** Parsed command line. */
  record Options(String provider, int iterations, int warmup, Path out, List<String> only) {
    Options(String provider, int iterations, int warmup, Path out) {
      this(provider, iterations, warmup, out, List.of());
    }

    /** Whether the scenario called {@code name} is to run. */
    boolean runs(String name) {
      return only.isEmpty() || only.contains(name);
    }
  }

  /** One measured round: does its own untimed setup and cleanup, returns its timings in ns. */
  @FunctionalInterface
  interface Round {
    long[] run() throws Exception;
  }

  /** A named scenario: {@code rounds} measured rounds after {@code warmupRounds} uncounted ones. */
  record Scenario(String name, int warmupRounds, int rounds, Round round) {}

  private final WorkspaceProvider provider;
  private final Command firstCommand;
  private final SplittableRandom random = new SplittableRandom();

  /** The workspace exec_true and write_read_1mib run in, created by {@link #open()}. */
  private Workspace shared;

  WorkspaceBench(WorkspaceProvider provider, Command firstCommand) {
    this.provider = provider;
    this.firstCommand = firstCommand;
  }

  public static void main(String[] args) {
    ENGINE_LOG.setLevel(java.util.logging.Level.WARNING);
    if (Arrays.asList(args).contains("--help") || Arrays.asList(args).contains("-h")) {
      System.out.print(USAGE);
      return;
    }
    Options options;
    try {
      options = parseArgs(args, Instant.now());
    } catch (IllegalArgumentException e) {
      System.err.println("bench: " + e.getMessage());
      System.err.print(USAGE);
      System.exit(2);
      return;
    }
    try {
      run(options);
    } catch (Exception e) {
      if (stopping) {
        // Ctrl-C/SIGTERM: the shutdown hook refused new workspaces or destroyed one in use
        System.err.println("bench: stopped by a signal (" + e.getMessage() + ")");
        return;
      }
      System.err.println("bench: failed: " + e);
      e.printStackTrace();
      System.exit(1);
    }
  }

  static void run(Options options) throws Exception {
    Path scratch = Files.createTempDirectory("sandbox4j-bench-");
    AtomicReference<Target> created = new AtomicReference<>();
    Thread cleanupOnSignal =
        new Thread(
            () -> {
              stopping = true;
              cleanUp(created.get(), scratch);
            });
    Runtime.getRuntime().addShutdownHook(cleanupOnSignal);
    try {
      Target target = target(options.provider(), scratch);
      created.set(target);
      WorkspaceProvider provider = target.provider();
      Command first = target.firstCommand();
      Instant date = Instant.now();
      Double loadAtStart = Report.loadAverage();
      PrintStream out = System.out;
      out.printf(
          "sandbox4j bench: provider %s, %d iterations (+%d warm-up), first command %s%n",
          // the option's name: 'gvisor' is the local engine's provider with another isolation
          options.provider(),
          options.iterations(),
          options.warmup(),
          String.join(" ", first.toArgv()));

      Map<String, Stats> results = new LinkedHashMap<>();
      out.println(headerRow());
      try (WorkspaceBench bench = new WorkspaceBench(provider, first).open()) {
        for (Scenario scenario : bench.scenarios(options.iterations(), options.warmup())) {
          if (options.runs(scenario.name())) {
            Stats stats = Stats.ofNanos(measure(scenario));
            results.put(scenario.name(), stats);
            out.println(row(scenario.name(), stats));
          }
        }
        if (target.extraScenarios().isPresent()) {
          try (Target.ExtraScenarios extra = target.extraScenarios().get()) {
            for (Scenario scenario : extra.scenarios(options.iterations(), options.warmup())) {
              if (options.runs(scenario.name())) {
                Stats stats = Stats.ofNanos(measure(scenario));
                results.put(scenario.name(), stats);
                out.println(row(scenario.name(), stats));
              }
            }
          }
        }
      }
      IdleMemory.Result memory = null;
      if (!options.runs(IdleMemory.NAME)) {
        System.err.printf("  skipping %s: not in --only%n", IdleMemory.NAME);
      } else if (target.sandboxed()) {
        memory = IdleMemory.measure(provider, IdleMemory.SANDBOXES);
        out.println();
        memory.tableRows().forEach(out::println);
      } else {
        System.err.printf(
            "  skipping %s: %s workspaces are not sandboxes%n", IdleMemory.NAME, provider.name());
      }

      Report.write(
          options.out(), date, loadAtStart, options, first, target.details(), results, memory);
      out.println("wrote " + options.out());
    } finally {
      try {
        Runtime.getRuntime().removeShutdownHook(cleanupOnSignal);
      } catch (IllegalStateException shuttingDown) {
        // the hook is running or about to: it cleans up
      }
      cleanUp(created.get(), scratch);
    }
  }

  /** Destroys what the target left, then deletes the scratch directory. */
  private static void cleanUp(Target target, Path scratch) {
    if (target != null) {
      try {
        target.close();
      } catch (RuntimeException e) {
        System.err.println("bench: cleanup failed: " + e);
      }
    }
    deleteTreeQuietly(scratch);
  }

  // ---- command line ----

  static Options parseArgs(String[] args, Instant now) {
    String provider = "host";
    int iterations = DEFAULT_ITERATIONS;
    int warmup = DEFAULT_WARMUP;
    Path out = null;
    List<String> only = List.of();
    for (int i = 0; i < args.length; i++) {
      String option = args[i];
      if (!List.of("--provider", "--iterations", "--warmup", "--out", "--only").contains(option)) {
        throw new IllegalArgumentException("unknown argument '" + option + "'");
      }
      if (i + 1 == args.length) {
        throw new IllegalArgumentException(option + " needs a value");
      }
      String value = args[++i];
      switch (option) {
        case "--provider" -> provider = value;
        case "--iterations" -> iterations = intValue(option, value);
        case "--warmup" -> warmup = intValue(option, value);
        case "--only" -> only = List.of(value.split(","));
        default -> out = Path.of(value);
      }
    }
    if (!PROVIDERS.containsKey(provider)) {
      throw new IllegalArgumentException(
          "unknown provider '" + provider + "'; known providers: " + knownProviders());
    }
    if (iterations < MIN_ITERATIONS) {
      throw new IllegalArgumentException(
          "--iterations must be at least "
              + MIN_ITERATIONS
              + " (p99 needs 100 samples to mean anything), got "
              + iterations);
    }
    if (warmup < 0) {
      throw new IllegalArgumentException("--warmup must not be negative, got " + warmup);
    }
    if (out == null) {
      out = defaultResultsDir().resolve(provider + "-" + timestamp(now) + ".json");
    }
    return new Options(provider, iterations, warmup, out, only);
  }

  private static int intValue(String option, String value) {
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(option + " needs a whole number, got '" + value + "'");
    }
  }

  /** bench/results of the checkout, as bench/run passes it; else bench/results under the cwd. */
  static Path defaultResultsDir() {
    return Path.of(System.getProperty("sandbox4j.bench.results", "bench/results"));
  }

  static String timestamp(Instant now) {
    return DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'").withZone(ZoneOffset.UTC).format(now);
  }

  // ---- providers ----

  /** The provider called {@code name}, over {@code scratch}. */
  static Target target(String name, Path scratch) {
    Function<Path, Target> factory = PROVIDERS.get(name);
    if (factory == null) {
      throw new IllegalArgumentException(
          "unknown provider '" + name + "'; known providers: " + knownProviders());
    }
    return factory.apply(scratch);
  }

  static String knownProviders() {
    return String.join(", ", PROVIDERS.keySet().stream().sorted().toList());
  }

  // ---- scenarios ----

  /** Creates the shared workspace. */
  WorkspaceBench open() {
    shared = Workspace.of(provider.newBackend());
    check(shared.run(TRUE), TRUE);
    return this;
  }

  /** Destroys the shared workspace. */
  @Override
  public void close() {
    if (shared != null) {
      shared.ref().ifPresent(provider::destroy);
    }
  }

  List<Scenario> scenarios(int iterations, int warmup) {
    int concurrentWarmup = (warmup + CONCURRENCY - 1) / CONCURRENCY;
    int concurrentRounds = Math.max(5, iterations / CONCURRENCY);
    return List.of(
        new Scenario("create_first_command", warmup, iterations, this::createFirstCommand),
        new Scenario("exec_true", warmup, iterations, this::execTrue),
        new Scenario("write_read_1mib", warmup, iterations, this::writeRead1Mib),
        new Scenario("destroy", warmup, iterations, this::destroy),
        new Scenario(
            "concurrent_create_" + CONCURRENCY,
            concurrentWarmup,
            concurrentRounds,
            this::concurrentCreate));
  }

  /** New backend, then its first command (creation happens there); destroy is not timed. */
  long[] createFirstCommand() {
    long start = System.nanoTime();
    Workspace ws = Workspace.of(provider.newBackend());
    try {
      CommandResult result = ws.run(firstCommand);
      long elapsed = System.nanoTime() - start;
      check(result, firstCommand);
      return new long[] {elapsed};
    } finally {
      destroyQuietly(ws);
    }
  }

  /** Round trip of {@code true} in the existing workspace. */
  long[] execTrue() {
    long start = System.nanoTime();
    CommandResult result = shared.run(TRUE);
    long elapsed = System.nanoTime() - start;
    check(result, TRUE);
    return new long[] {elapsed};
  }

  /** writeBytes of 1 MiB of fresh random bytes, then readBytes of it, in the existing workspace. */
  long[] writeRead1Mib() {
    byte[] blob = new byte[BLOB_BYTES];
    random.nextBytes(blob);
    long start = System.nanoTime();
    shared.writeBytes("blob.bin", blob);
    byte[] back = shared.readBytes("blob.bin");
    long elapsed = System.nanoTime() - start;
    if (!Arrays.equals(blob, back)) {
      throw new IllegalStateException("blob.bin read back differs from what was written");
    }
    return new long[] {elapsed};
  }

  /** provider.destroy of a workspace that has run one command. */
  long[] destroy() {
    Workspace ws = Workspace.of(provider.newBackend());
    try {
      check(ws.run(TRUE), TRUE);
    } catch (RuntimeException e) {
      destroyQuietly(ws);
      throw e;
    }
    WorkspaceRef ref = ws.open();
    long start = System.nanoTime();
    provider.destroy(ref);
    return new long[] {System.nanoTime() - start};
  }

  /**
   * {@link #CONCURRENCY} virtual threads released together, each timing new backend + first
   * command; one sample per workspace. Destroys are not timed.
   */
  long[] concurrentCreate() throws InterruptedException, ExecutionException {
    long[] elapsed = new long[CONCURRENCY];
    Workspace[] workspaces = new Workspace[CONCURRENCY];
    CountDownLatch ready = new CountDownLatch(CONCURRENCY);
    CountDownLatch go = new CountDownLatch(1);
    try (ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
      List<Future<?>> futures = new ArrayList<>();
      for (int i = 0; i < CONCURRENCY; i++) {
        int slot = i;
        futures.add(
            threads.submit(
                () -> {
                  ready.countDown();
                  go.await();
                  long start = System.nanoTime();
                  Workspace ws = Workspace.of(provider.newBackend());
                  workspaces[slot] = ws;
                  CommandResult result = ws.run(firstCommand);
                  elapsed[slot] = System.nanoTime() - start;
                  check(result, firstCommand);
                  return null;
                }));
      }
      ready.await();
      go.countDown();
      for (Future<?> future : futures) {
        future.get();
      }
    } finally {
      for (Workspace ws : workspaces) {
        destroyQuietly(ws);
      }
    }
    return elapsed;
  }

  /** Runs the warm-up rounds, then the measured ones; returns every measured sample in order. */
  static long[] measure(Scenario scenario) throws Exception {
    System.err.printf("  running %s...%n", scenario.name());
    for (int i = 0; i < scenario.warmupRounds(); i++) {
      scenario.round().run();
    }
    List<long[]> rounds = new ArrayList<>();
    for (int i = 0; i < scenario.rounds(); i++) {
      rounds.add(scenario.round().run());
    }
    return rounds.stream().flatMapToLong(Arrays::stream).toArray();
  }

  private static void check(CommandResult result, Command command) {
    if (!result.succeeded()) {
      throw new IllegalStateException(
          String.join(" ", command.toArgv())
              + " exited "
              + result.exitCode()
              + ": "
              + result.stderrText().strip());
    }
  }

  private void destroyQuietly(Workspace ws) {
    if (ws == null) {
      return;
    }
    try {
      ws.ref().ifPresent(provider::destroy);
    } catch (RuntimeException e) {
      System.err.println("bench: could not destroy " + ws + ": " + e);
    }
  }

  // ---- output ----

  static String headerRow() {
    return String.format(
        Locale.ROOT,
        "%-24s %5s %10s %10s %10s %10s",
        "scenario",
        "n",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms");
  }

  static String row(String name, Stats s) {
    return String.format(
        Locale.ROOT,
        "%-24s %5d %10.3f %10.3f %10.3f %10.3f",
        name,
        s.n(),
        s.p50(),
        s.p95(),
        s.p99(),
        s.max());
  }

  /** Deletes {@code dir} and everything in it (retrying if entries come and go meanwhile). */
  static void deleteTreeQuietly(Path dir) {
    for (int attempt = 1; Files.exists(dir, LinkOption.NOFOLLOW_LINKS); attempt++) {
      try (Stream<Path> walk = Files.walk(dir)) {
        for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      } catch (IOException | RuntimeException e) {
        // a workspace created or destroyed meanwhile (a signal mid-run): walk again
        if (attempt == 10) {
          System.err.println("bench: could not delete " + dir + ": " + e);
          return;
        }
      }
    }
  }
}
