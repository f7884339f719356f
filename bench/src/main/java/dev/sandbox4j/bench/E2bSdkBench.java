package dev.sandbox4j.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerKeys;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * E2B's JavaScript SDK ({@code bench/e2b}, pinned by its lock file, installed with {@code npm ci})
 * against a server this run starts on loopback over the local engine, beside Sandbox4j's own remote
 * client ({@code RemoteSandbox}) against the same server in the same run: {@code Sandbox.create} +
 * {@code commands.run('true')}, and {@code commands.run('true')} alone. Prints p50/p95/p99 per
 * client and scenario, then the report as JSON. Run with {@code bench/e2b/run [iterations]}.
 */
public final class E2bSdkBench {

  private E2bSdkBench() {}

  public static void main(String[] args) throws Exception {
    int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 50;
    int warmup = 5;
    Path dir = Path.of(System.getProperty("sandbox4j.bench.e2b", "bench/e2b"));
    Path data = Files.createTempDirectory("sandbox4j-e2b-bench");
    String key;
    try (ServerKeys keys = ServerKeys.open(data)) {
      key = keys.create("bench").key();
    }
    try (SandboxServer server =
        SandboxServer.builder()
            .engine(LocalSandbox.builder().build())
            .dataDirectory(data)
            .bind("127.0.0.1", 0)
            .requestLog(line -> {})
            .maxSandboxesPerOrganization(10_000)
            .createRateLimit(10_000, Duration.ofMillis(1))
            .build()
            .start()) {
      String base = server.uri().toString();
      ObjectNode report = new ObjectMapper().createObjectNode();
      report.put("iterations", iterations);
      report.put("warmup", warmup);
      report.put("server", base);

      JsonNode e2b = runNode(dir, iterations, warmup, key, base);
      Stats e2bCreate = Stats.ofNanos(longs(e2b.get("create_run")));
      Stats e2bRun = Stats.ofNanos(longs(e2b.get("run")));

      RemoteSandbox remote = RemoteSandbox.builder().url(server.uri()).apiKey(key).build();
      long[] createRun = new long[iterations];
      for (int i = 0; i < warmup + iterations; i++) {
        long t0 = System.nanoTime();
        Workspace ws = Workspace.of(remote.newBackend());
        ws.run(Command.argv("true"));
        long t1 = System.nanoTime();
        remote.destroy(ws.ref().orElseThrow());
        if (i >= warmup) {
          createRun[i - warmup] = t1 - t0;
        }
      }
      long[] run = new long[iterations];
      Workspace one = Workspace.of(remote.newBackend());
      for (int i = 0; i < warmup + iterations; i++) {
        long t0 = System.nanoTime();
        one.run(Command.argv("true"));
        long t1 = System.nanoTime();
        if (i >= warmup) {
          run[i - warmup] = t1 - t0;
        }
      }
      // what the SDK's commands.run('true') runs: a login bash, which alone costs tens of ms
      long[] loginRun = new long[iterations];
      for (int i = 0; i < warmup + iterations; i++) {
        long t0 = System.nanoTime();
        one.run(Command.argv("/bin/bash", "-l", "-c", "true"));
        long t1 = System.nanoTime();
        if (i >= warmup) {
          loginRun[i - warmup] = t1 - t0;
        }
      }
      remote.destroy(one.ref().orElseThrow());
      Stats remoteLoginRun = Stats.ofNanos(loginRun);
      Stats remoteCreate = Stats.ofNanos(createRun);
      Stats remoteRun = Stats.ofNanos(run);

      print("e2b sdk  create+run(true)", e2bCreate);
      print("remote   create+run(true)", remoteCreate);
      print("e2b sdk  run(true)       ", e2bRun);
      print("remote   run(true)       ", remoteRun);
      print("remote   run(bash -l -c true)", remoteLoginRun);
      System.out.printf(
          "ratio e2b/remote p50: create+run %.2f, run %.2f, run vs the same login bash %.2f%n",
          e2bCreate.p50() / remoteCreate.p50(),
          e2bRun.p50() / remoteRun.p50(),
          e2bRun.p50() / remoteLoginRun.p50());
      put(report, "e2b_create_run", e2bCreate);
      put(report, "remote_create_run", remoteCreate);
      put(report, "e2b_run", e2bRun);
      put(report, "remote_run", remoteRun);
      put(report, "remote_login_bash_run", remoteLoginRun);
      System.out.println(report.toPrettyString());
    }
  }

  private static JsonNode runNode(Path dir, int iterations, int warmup, String key, String base)
      throws Exception {
    if (!Files.isDirectory(dir.resolve("node_modules/e2b"))) {
      Process npm =
          new ProcessBuilder("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
              .directory(dir.toFile())
              .inheritIO()
              .start();
      if (npm.waitFor() != 0) {
        throw new IllegalStateException("npm ci failed in " + dir);
      }
    }
    ProcessBuilder pb =
        new ProcessBuilder("node", "bench.mjs")
            .directory(dir.toFile())
            .redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment()
        .putAll(
            Map.of(
                "E2B_API_KEY",
                key,
                "E2B_API_URL",
                base + "/e2b",
                "E2B_SANDBOX_URL",
                base + "/e2b/envd",
                "ITERATIONS",
                Integer.toString(iterations),
                "WARMUP",
                Integer.toString(warmup)));
    Process node = pb.start();
    String out = new String(node.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!node.waitFor(30, TimeUnit.MINUTES) || node.exitValue() != 0) {
      throw new IllegalStateException("bench.mjs failed: " + out);
    }
    return new ObjectMapper().readTree(out);
  }

  private static long[] longs(JsonNode array) {
    long[] out = new long[array.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = array.get(i).asLong();
    }
    return out;
  }

  private static void print(String what, Stats s) {
    System.out.printf(
        "%s  n=%d  p50 %.1f ms  p95 %.1f ms  p99 %.1f ms%n",
        what, s.n(), s.p50(), s.p95(), s.p99());
  }

  private static void put(ObjectNode report, String name, Stats s) {
    report
        .putObject(name)
        .put("n", s.n())
        .put("p50_ms", s.p50())
        .put("p95_ms", s.p95())
        .put("p99_ms", s.p99())
        .put("max_ms", s.max());
  }
}
