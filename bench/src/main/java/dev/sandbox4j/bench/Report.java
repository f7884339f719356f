package dev.sandbox4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.workspace.Command;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** The JSON report of one bench run: machine, settings and every scenario's figures and samples. */
final class Report {

  private Report() {}

  static void write(
      Path file,
      Instant date,
      Double loadAtStart,
      WorkspaceBench.Options options,
      Command firstCommand,
      Map<String, Object> providerDetails,
      Map<String, Stats> results,
      IdleMemory.Result idleMemory)
      throws IOException {
    Map<String, Object> report = new LinkedHashMap<>();
    report.put("provider", options.provider());
    report.put("provider_details", providerDetails);
    report.put("date", date.toString());
    report.put("iterations", options.iterations());
    report.put("warmup_iterations", options.warmup());
    report.put("first_command", firstCommand.toArgv());
    report.put("machine", machine());
    report.put("load_average_1m_start", loadAtStart);
    report.put("load_average_1m_end", loadAverage());
    Map<String, Object> scenarios = new LinkedHashMap<>();
    results.forEach((name, stats) -> scenarios.put(name, scenario(stats)));
    report.put("scenarios", scenarios);
    if (idleMemory != null) {
      report.put(IdleMemory.NAME, idleMemory.toJson());
    }

    Path parent = file.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(file.toFile(), report);
  }

  static Map<String, Object> scenario(Stats s) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("n", s.n());
    m.put("p50_ms", s.p50());
    m.put("p95_ms", s.p95());
    m.put("p99_ms", s.p99());
    m.put("max_ms", s.max());
    m.put("mean_ms", s.mean());
    m.put("samples_ms", s.samples());
    return m;
  }

  static Map<String, Object> machine() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("os_name", System.getProperty("os.name"));
    m.put("os_arch", System.getProperty("os.arch"));
    m.put("kernel", kernel());
    m.put("available_processors", Runtime.getRuntime().availableProcessors());
    m.put("total_memory_bytes", totalMemory());
    m.put("jvm_max_heap_bytes", Runtime.getRuntime().maxMemory());
    m.put("java_version", System.getProperty("java.version"));
    m.put("java_vm", System.getProperty("java.vm.name"));
    return m;
  }

  /** Physical memory of the machine (or of the container, if limited), or null if unknown. */
  static Long totalMemory() {
    if (ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.OperatingSystemMXBean os) {
      return os.getTotalMemorySize();
    }
    return null;
  }

  /** The system's 1-minute load average (above the processor count: noisy figures), or null. */
  static Double loadAverage() {
    double load = ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    return load < 0 ? null : load;
  }

  /** {@code uname -r}, or null where there is no uname. */
  static String kernel() {
    try {
      Process uname = new ProcessBuilder("uname", "-r").redirectErrorStream(true).start();
      String out = new String(uname.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!uname.waitFor(5, TimeUnit.SECONDS) || uname.exitValue() != 0) {
        uname.destroyForcibly();
        return null;
      }
      return out.strip();
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }
}
