package dev.sandbox4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Issue 20's speed figures: pull throughput from a registry on loopback (Debian's {@code
 * docker-registry}, started here), and create → first command on a pulled image against the same on
 * the default image, which must be within 5 ms of each other.
 *
 * <p>The image pulled is the engine's own default image, pushed to the registry first ({@link
 * LocalSandbox#pushImage}): a real Debian image of a few hundred MiB, whose pushed config runs it
 * as the default runs. Each pull goes to a fresh state directory, so every layer is downloaded and
 * extracted. The create comparison runs both images in one state directory, interleaved, so that
 * the host's load falls on both alike.
 *
 * <pre>bench/pull [--pulls N] [--iterations N] [--warmup N] [--out FILE]</pre>
 */
public final class PullBench {
  private static final Command FIRST = Command.argv("node", "-v");
  private static final String REGISTRY = "/usr/bin/docker-registry";

  private PullBench() {}

  public static void main(String[] args) throws Exception {
    int pulls = 5;
    int iterations = 100;
    int warmup = 10;
    Path out = null;
    for (int i = 0; i < args.length; i++) {
      String option = args[i];
      if (i + 1 >= args.length) {
        usage("missing the value of " + option);
      }
      String value = args[++i];
      switch (option) {
        case "--pulls" -> pulls = Integer.parseInt(value);
        case "--iterations" -> iterations = Integer.parseInt(value);
        case "--warmup" -> warmup = Integer.parseInt(value);
        case "--out" -> out = Path.of(value);
        default -> usage("unknown option " + option);
      }
    }
    if (pulls < 1 || iterations < 100 || warmup < 0) {
      usage("--pulls must be at least 1, --iterations at least 100, --warmup not negative");
    }
    if (!"root".equals(System.getProperty("user.name")) || !Files.isExecutable(Path.of(REGISTRY))) {
      usage("needs root and " + REGISTRY + " (apt-get install docker-registry)");
    }
    java.util.logging.Logger engineLog =
        java.util.logging.Logger.getLogger("dev.sandbox4j.runtime");
    engineLog.setLevel(java.util.logging.Level.WARNING);
    if (out == null) {
      String stamp =
          DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'")
              .format(
                  Instant.now().truncatedTo(ChronoUnit.SECONDS).atZone(java.time.ZoneOffset.UTC));
      out =
          Path.of(System.getProperty("sandbox4j.bench.results", "bench/results"))
              .resolve("pull-" + stamp + ".json");
    }
    Path scratch = Files.createTempDirectory(Path.of("/var/tmp"), "sandbox4j-pull-bench-");
    Files.setPosixFilePermissions(
        scratch, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
    Process registry = null;
    try {
      int port;
      try (ServerSocket free = new ServerSocket(0)) {
        port = free.getLocalPort();
      }
      registry = startRegistry(scratch.resolve("registry"), port);
      String reference = "127.0.0.1:" + port + "/bench/default:1";

      LocalSandbox engine =
          LocalSandbox.builder().progress(line -> System.err.println("bench: " + line)).build();
      ImageInfo base = engine.buildDefaultImage(false);
      long pushStart = System.nanoTime();
      String pushed = engine.pushImage(base.name(), reference);
      double pushSeconds = (System.nanoTime() - pushStart) / 1e9;
      System.err.printf(Locale.ROOT, "bench: pushed %s in %.1f s%n", pushed, pushSeconds);
      long blobBytes = registryBlobBytes(scratch.resolve("registry/storage"));
      // The push left hundreds of MiB to write back: the pulls should not pay for that.
      new ProcessBuilder("sync").inheritIO().start().waitFor();

      List<Double> pullSeconds = new ArrayList<>();
      for (int i = 0; i < pulls; i++) {
        Path home = Files.createDirectory(scratch.resolve("pull-" + i));
        Files.setPosixFilePermissions(
            home, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        LocalSandbox fresh = LocalSandbox.builder().home(home).progress(line -> {}).build();
        long start = System.nanoTime();
        fresh.pullImage(reference);
        pullSeconds.add((System.nanoTime() - start) / 1e9);
        System.err.printf(Locale.ROOT, "bench: pull %d: %.2f s%n", i + 1, pullSeconds.getLast());
        deleteTree(home);
      }

      ImageInfo pulled = engine.pullImage(reference);
      LocalSandbox onDefault = LocalSandbox.builder().progress(line -> {}).build();
      LocalSandbox onPulled =
          LocalSandbox.builder().image(pulled.name()).progress(line -> {}).build();
      long[] defaultNanos = new long[iterations];
      long[] pulledNanos = new long[iterations];
      for (int i = -warmup; i < iterations; i++) {
        long d = createFirstCommand(onDefault);
        long p = createFirstCommand(onPulled);
        if (i >= 0) {
          defaultNanos[i] = d;
          pulledNanos[i] = p;
        }
      }
      Stats onDefaultStats = Stats.ofNanos(defaultNanos);
      Stats onPulledStats = Stats.ofNanos(pulledNanos);
      engine.removeImage(pulled.name());

      double[] seconds = pullSeconds.stream().mapToDouble(Double::doubleValue).sorted().toArray();
      double p50 = Stats.percentile(seconds, 50);
      double mibPerSecond = blobBytes / (1024.0 * 1024.0) / p50;
      System.out.printf(
          Locale.ROOT,
          "sandbox4j pull bench: %s (%.1f MiB of blobs), %d pulls, %d creates each%n",
          pushed,
          blobBytes / (1024.0 * 1024.0),
          pulls,
          iterations);
      System.out.printf(
          Locale.ROOT,
          "pull into an empty store: p50 %.2f s, max %.2f s: %.1f MiB/s of blobs (download,"
              + " verify, extract)%n",
          p50,
          seconds[seconds.length - 1],
          mibPerSecond);
      System.out.printf(
          Locale.ROOT,
          "%-36s %9s %9s %9s %9s%n",
          "create_first_command (ms)",
          "p50",
          "p95",
          "p99",
          "max");
      for (Map.Entry<String, Stats> row :
          Map.of("default image", onDefaultStats, "pulled image", onPulledStats).entrySet().stream()
              .sorted(Map.Entry.comparingByKey())
              .toList()) {
        Stats s = row.getValue();
        System.out.printf(
            Locale.ROOT,
            "%-36s %9.1f %9.1f %9.1f %9.1f%n",
            row.getKey(),
            s.p50(),
            s.p95(),
            s.p99(),
            s.max());
      }
      System.out.printf(
          Locale.ROOT,
          "p50 difference (pulled - default): %+.1f ms%n",
          onPulledStats.p50() - onDefaultStats.p50());

      Map<String, Object> report = new LinkedHashMap<>();
      report.put("date", Instant.now().toString());
      report.put("reference", pushed);
      report.put("blob_bytes", blobBytes);
      report.put("push_seconds_first", pushSeconds);
      report.put("pull_seconds", pullSeconds);
      report.put("pull_mib_per_second_p50", mibPerSecond);
      report.put("create_first_command_default_image", Report.scenario(onDefaultStats));
      report.put("create_first_command_pulled_image", Report.scenario(onPulledStats));
      report.put("machine", Report.machine());
      report.put("load_average_1m_end", Report.loadAverage());
      Files.createDirectories(out.toAbsolutePath().getParent());
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .writeValue(out.toFile(), report);
      System.out.println("wrote " + out);
    } finally {
      if (registry != null) {
        registry.destroy();
        registry.waitFor(10, TimeUnit.SECONDS);
      }
      deleteTree(scratch);
    }
  }

  private static long createFirstCommand(LocalSandbox sandboxes) {
    long start = System.nanoTime();
    Workspace ws = Workspace.of(sandboxes.newBackend());
    try {
      CommandResult r = ws.run(FIRST);
      long elapsed = System.nanoTime() - start;
      if (r.exitCode() != 0) {
        throw new IllegalStateException("node -v failed: " + r.stderrText());
      }
      return elapsed;
    } finally {
      ws.ref().ifPresent(sandboxes::destroy);
    }
  }

  private static Process startRegistry(Path dir, int port)
      throws IOException, InterruptedException {
    Files.createDirectories(dir.resolve("storage"));
    Path config = dir.resolve("config.yml");
    Files.writeString(
        config,
        """
        version: 0.1
        log:
          level: warn
        storage:
          filesystem:
            rootdirectory: %s
        http:
          addr: 127.0.0.1:%d
        """
            .formatted(dir.resolve("storage"), port));
    Path log = dir.resolve("registry.log");
    Process p =
        new ProcessBuilder(REGISTRY, "serve", config.toString())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
    for (int i = 0; i < 100; i++) {
      try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
        return p;
      } catch (IOException notYet) {
        if (!p.isAlive()) {
          break;
        }
        Thread.sleep(100);
      }
    }
    p.destroyForcibly();
    throw new IOException(
        "docker-registry did not start: " + Files.readString(log, StandardCharsets.UTF_8));
  }

  /** The bytes of every blob the registry stores: the image's compressed layers and config. */
  private static long registryBlobBytes(Path storage) throws IOException {
    Path blobs = storage.resolve("docker/registry/v2/blobs");
    try (Stream<Path> files = Files.walk(blobs)) {
      return files
          .filter(p -> p.getFileName().toString().equals("data"))
          .mapToLong(
              p -> {
                try {
                  return Files.size(p);
                } catch (IOException e) {
                  throw new java.io.UncheckedIOException(e);
                }
              })
          .sum();
    }
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }

  private static void usage(String problem) {
    System.err.println("bench/pull: " + problem);
    System.err.println(
        "usage: bench/pull [--pulls N (default 5)] [--iterations N (>= 100, default 100)]"
            + " [--warmup N (default 10)] [--out FILE]");
    System.exit(64);
  }
}
