package dev.sandbox4j.bench;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Scenario {@code idle_memory_per_sandbox}: host memory that idle sandboxes hold. Creates {@code k}
 * sandboxes (each runs {@code true} once, so it is up), waits, then reads each sandbox's memory
 * cgroup ({@code memory.usage_in_bytes}, cgroup v1; {@code memory.current} on a cgroup v2 only
 * host) and, as a noisier whole-machine figure, the drop of {@code MemAvailable} per sandbox. Also
 * lists host processes that belong to the sandboxes but live outside their cgroups (an OCI runtime
 * that stays resident, a monitor): with crun there should be none.
 */
final class IdleMemory {

  static final String NAME = "idle_memory_per_sandbox";
  static final int SANDBOXES = 20;
  static final Duration SETTLE = Duration.ofSeconds(1);

  private static final Command TRUE = Command.argv("true");

  /** Kernel memory that namespaces, mounts and page tables take, not charged to a sandbox. */
  private static final List<String> KERNEL_KEYS =
      List.of("SUnreclaim", "KernelStack", "PageTables");

  private static final List<String> MEMINFO_KEYS =
      List.of("MemAvailable", "MemFree", "Slab", "SUnreclaim", "KernelStack", "PageTables");
  private static final Path CGROUP_V1 = Path.of("/sys/fs/cgroup/memory/sandbox4j");
  private static final Path CGROUP_V2 = Path.of("/sys/fs/cgroup/sandbox4j");
  private static final Set<String> RUNTIME_COMMS =
      Set.of("crun", "runc", "runsc", "conmon", "catatonit", "containerd-shim");

  private IdleMemory() {}

  /** One sandbox's memory cgroup, read after the settle time. */
  record Sandbox(
      String id,
      long usageBytes,
      Long rssBytes,
      Long cacheBytes,
      Long kmemBytes,
      int processes,
      long processesRssBytes) {

    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("id", id);
      m.put("usage_bytes", usageBytes);
      m.put("rss_bytes", rssBytes);
      m.put("cache_bytes", cacheBytes);
      m.put("kmem_bytes", kmemBytes);
      m.put("processes", processes);
      m.put("processes_rss_bytes", processesRssBytes);
      return m;
    }
  }

  /** A host process (seen from the host) with its resident memory. */
  record HostProcess(long pid, String comm, long rssBytes, String cmdline) {
    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("pid", pid);
      m.put("comm", comm);
      m.put("rss_bytes", rssBytes);
      m.put("cmdline", cmdline);
      return m;
    }
  }

  /** What the scenario measured. */
  record Result(
      String cgroupFile,
      List<Sandbox> sandboxes,
      Map<String, Long> meminfoBefore,
      Map<String, Long> meminfoAfter,
      long jvmRssBeforeBytes,
      long jvmRssAfterBytes,
      List<HostProcess> hostProcesses,
      int otherRuntimeProcesses) {

    int k() {
      return sandboxes.size();
    }

    long[] usage() {
      return sandboxes.stream().mapToLong(Sandbox::usageBytes).toArray();
    }

    long p50() {
      return percentile(usage(), 50);
    }

    long max() {
      return Arrays.stream(usage()).max().orElseThrow();
    }

    long mean() {
      return Math.round(Arrays.stream(usage()).average().orElseThrow());
    }

    long memAvailableDropPerSandbox() {
      return perSandbox(meminfoBefore.get("MemAvailable") - meminfoAfter.get("MemAvailable"));
    }

    /** The same, less what the bench's own JVM grew by meanwhile (its RSS after minus before). */
    long memAvailableDropExcludingJvmPerSandbox() {
      return perSandbox(
          meminfoBefore.get("MemAvailable")
              - meminfoAfter.get("MemAvailable")
              - (jvmRssAfterBytes - jvmRssBeforeBytes));
    }

    /** Growth of unreclaimable kernel memory (slab, stacks, page tables) per sandbox. */
    long kernelGrowthPerSandbox() {
      long growth = 0;
      for (String key : KERNEL_KEYS) {
        growth += meminfoAfter.getOrDefault(key, 0L) - meminfoBefore.getOrDefault(key, 0L);
      }
      return perSandbox(growth);
    }

    private long perSandbox(long bytes) {
      return Math.round(bytes / (double) k());
    }

    long hostProcessesRss() {
      return hostProcesses.stream().mapToLong(HostProcess::rssBytes).sum();
    }

    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("sandboxes", k());
      m.put("settle_ms", SETTLE.toMillis());
      m.put("setup", "each sandbox is created and runs `true` once, then stays idle");

      Map<String, Object> cgroup = new LinkedHashMap<>();
      cgroup.put("file", cgroupFile);
      cgroup.put("n", k());
      cgroup.put("p50_bytes", p50());
      cgroup.put("max_bytes", max());
      cgroup.put("mean_bytes", mean());
      cgroup.put("sum_bytes", Arrays.stream(usage()).sum());
      cgroup.put("per_sandbox", sandboxes.stream().map(Sandbox::toJson).toList());
      m.put("cgroup", cgroup);

      Map<String, Object> available = new LinkedHashMap<>();
      available.put(
          "note",
          "whole machine, so noisy: anything else that allocates or frees meanwhile counts");
      available.put("before_bytes", meminfoBefore.get("MemAvailable"));
      available.put("after_bytes", meminfoAfter.get("MemAvailable"));
      available.put("drop_per_sandbox_bytes", memAvailableDropPerSandbox());
      available.put(
          "drop_excluding_bench_jvm_per_sandbox_bytes", memAvailableDropExcludingJvmPerSandbox());
      available.put("kernel_growth_per_sandbox_bytes", kernelGrowthPerSandbox());
      available.put("meminfo_before_bytes", meminfoBefore);
      available.put("meminfo_after_bytes", meminfoAfter);
      available.put("jvm_rss_before_bytes", jvmRssBeforeBytes);
      available.put("jvm_rss_after_bytes", jvmRssAfterBytes);
      m.put("mem_available", available);

      Map<String, Object> host = new LinkedHashMap<>();
      host.put("count", hostProcesses.size());
      host.put("rss_bytes", hostProcessesRss());
      host.put("rss_per_sandbox_bytes", Math.round(hostProcessesRss() / (double) k()));
      host.put("processes", hostProcesses.stream().map(HostProcess::toJson).toList());
      host.put("other_runtime_processes", otherRuntimeProcesses);
      m.put("host_processes", host);
      return m;
    }

    List<String> tableRows() {
      List<String> rows = new ArrayList<>();
      rows.add(
          String.format(
              Locale.ROOT, "%-40s %5s %10s %10s %10s", NAME + " (MiB)", "n", "p50", "max", "mean"));
      rows.add(
          String.format(
              Locale.ROOT,
              "%-40s %5d %10.3f %10.3f %10.3f",
              "  cgroup memory usage",
              k(),
              mib(p50()),
              mib(max()),
              mib(mean())));
      addRow(rows, "    of which rss (memory.stat)", known(Sandbox::rssBytes));
      addRow(rows, "    of which cache (memory.stat)", known(Sandbox::cacheBytes));
      addRow(rows, "    kmem (included in usage)", known(Sandbox::kmemBytes));
      rows.add(meanRow("  MemAvailable drop / sandbox (noisy)", k(), memAvailableDropPerSandbox()));
      rows.add(
          meanRow(
              "    less the bench JVM's RSS growth",
              k(),
              memAvailableDropExcludingJvmPerSandbox()));
      rows.add(meanRow("  kernel unreclaimable growth (noisy)", k(), kernelGrowthPerSandbox()));
      rows.add(
          meanRow(
              "  crun-related host processes RSS",
              hostProcesses.size(),
              Math.round(hostProcessesRss() / (double) k())));
      return rows;
    }

    /** The values {@code figure} has for the sandboxes where the kernel reports it. */
    private long[] known(java.util.function.Function<Sandbox, Long> figure) {
      return sandboxes.stream().map(figure).filter(v -> v != null).mapToLong(v -> v).toArray();
    }

    /** A row with a mean only (p50 and max do not apply). */
    private static String meanRow(String label, int n, long bytes) {
      return String.format(
          Locale.ROOT, "%-40s %5d %10s %10s %10.3f", label, n, "-", "-", mib(bytes));
    }

    private static void addRow(List<String> rows, String label, long[] values) {
      if (values.length == 0) {
        return;
      }
      rows.add(
          String.format(
              Locale.ROOT,
              "%-40s %5d %10.3f %10.3f %10.3f",
              label,
              values.length,
              mib(percentile(values, 50)),
              mib(Arrays.stream(values).max().orElseThrow()),
              mib(Math.round(Arrays.stream(values).average().orElseThrow()))));
    }
  }

  /** Runs the scenario; every sandbox it created is destroyed before it returns. */
  static Result measure(WorkspaceProvider provider, int k) throws Exception {
    System.err.printf("  running %s (%d sandboxes)...%n", NAME, k);
    List<Workspace> workspaces = new ArrayList<>();
    try {
      settle();
      Map<String, Long> meminfoBefore = meminfo();
      long jvmBefore = jvmRss();
      List<String> ids = new ArrayList<>();
      for (int i = 0; i < k; i++) {
        Workspace ws = Workspace.of(provider.newBackend());
        workspaces.add(ws);
        CommandResult r = ws.run(TRUE);
        if (!r.succeeded()) {
          throw new IllegalStateException("true exited " + r.exitCode() + " in a new sandbox");
        }
        ids.add(ws.open().id());
      }
      Thread.sleep(SETTLE);
      List<Sandbox> sandboxes = new ArrayList<>();
      String file = null;
      for (String id : ids) {
        Sandbox s = readCgroup(id);
        sandboxes.add(s);
        file = cgroupFile(id).toString().replace(id, "<id>");
      }
      List<HostProcess> outside = new ArrayList<>();
      int others = hostProcesses(Set.copyOf(ids), outside);
      settle();
      Map<String, Long> meminfoAfter = meminfo();
      long jvmAfter = jvmRss();
      return new Result(
          file, sandboxes, meminfoBefore, meminfoAfter, jvmBefore, jvmAfter, outside, others);
    } finally {
      for (Workspace ws : workspaces) {
        try {
          ws.ref().ifPresent(provider::destroy);
        } catch (RuntimeException e) {
          System.err.println("bench: could not destroy " + ws + ": " + e);
        }
      }
    }
  }

  /** A GC and a short pause, so that the JVM's own garbage weighs less on MemAvailable. */
  private static void settle() throws InterruptedException {
    System.gc();
    Thread.sleep(100);
  }

  // ---- cgroups ----

  private static Path cgroupFile(String id) {
    Path v1 = CGROUP_V1.resolve(id).resolve("memory.usage_in_bytes");
    return Files.exists(v1) ? v1 : CGROUP_V2.resolve(id).resolve("memory.current");
  }

  static Sandbox readCgroup(String id) throws IOException {
    Path usage = cgroupFile(id);
    if (!Files.exists(usage)) {
      throw new IllegalStateException(
          "sandbox " + id + " has no memory cgroup (looked for " + usage + ")");
    }
    Path dir = usage.getParent();
    boolean v1 = usage.getFileName().toString().equals("memory.usage_in_bytes");
    Map<String, Long> stat = keyValues(dir.resolve("memory.stat"));
    Long rss = v1 ? stat.get("rss") : stat.get("anon");
    Long cache = v1 ? stat.get("cache") : stat.get("file");
    Long kmem = v1 ? readLongOrNull(dir.resolve("memory.kmem.usage_in_bytes")) : stat.get("kernel");
    List<Long> pids = new ArrayList<>();
    for (String line : Files.readAllLines(dir.resolve("cgroup.procs"))) {
      if (!line.isBlank()) {
        pids.add(Long.parseLong(line.strip()));
      }
    }
    long processesRss = 0;
    for (long pid : pids) {
      processesRss += rssOf(pid);
    }
    return new Sandbox(
        id,
        Long.parseLong(Files.readString(usage).strip()),
        rss,
        cache,
        kmem,
        pids.size(),
        processesRss);
  }

  private static Long readLongOrNull(Path file) {
    try {
      return Long.parseLong(Files.readString(file).strip());
    } catch (IOException | NumberFormatException e) {
      return null;
    }
  }

  private static Map<String, Long> keyValues(Path file) {
    Map<String, Long> m = new LinkedHashMap<>();
    try {
      for (String line : Files.readAllLines(file)) {
        String[] kv = line.strip().split("\\s+");
        if (kv.length == 2) {
          try {
            m.put(kv[0], Long.parseLong(kv[1]));
          } catch (NumberFormatException e) {
            // not a number: not ours
          }
        }
      }
    } catch (IOException e) {
      // no memory.stat: rss and cache stay unknown
    }
    return m;
  }

  // ---- host processes ----

  /**
   * Adds to {@code outside} every host process whose command line names one of {@code ids} and that
   * is not inside that sandbox's memory cgroup (a runtime or monitor that stayed); returns how many
   * other OCI-runtime processes (crun, catatonit, ...) outside any sandbox cgroup exist — other
   * users' containers being created, say — which are not counted.
   */
  static int hostProcesses(Set<String> ids, List<HostProcess> outside) throws IOException {
    long self = ProcessHandle.current().pid();
    int others = 0;
    List<Path> procs;
    try (Stream<Path> s = Files.list(Path.of("/proc"))) {
      procs =
          s.filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit)).toList();
    }
    for (Path proc : procs) {
      long pid = Long.parseLong(proc.getFileName().toString());
      if (pid == self) {
        continue;
      }
      String cmdline;
      String comm;
      String memoryCgroup;
      try {
        cmdline =
            new String(Files.readAllBytes(proc.resolve("cmdline")), StandardCharsets.UTF_8)
                .replace('\0', ' ')
                .strip();
        comm = Files.readString(proc.resolve("comm")).strip();
        memoryCgroup = memoryCgroup(proc);
      } catch (IOException e) {
        continue; // exited meanwhile
      }
      if (cmdline.isEmpty()) {
        continue; // a kernel thread
      }
      boolean inSandbox = memoryCgroup.startsWith("/sandbox4j/");
      String named = ids.stream().filter(cmdline::contains).findFirst().orElse(null);
      if (named != null && !memoryCgroup.equals("/sandbox4j/" + named)) {
        outside.add(new HostProcess(pid, comm, rssOf(pid), cmdline));
      } else if (named == null && !inSandbox && RUNTIME_COMMS.contains(comm)) {
        others++;
      }
    }
    return others;
  }

  /** The process's memory cgroup path (cgroup v1), else its cgroup v2 path. */
  private static String memoryCgroup(Path proc) throws IOException {
    String unified = "";
    for (String line : Files.readAllLines(proc.resolve("cgroup"))) {
      String[] parts = line.split(":", 3);
      if (parts.length < 3) {
        continue;
      }
      if (Arrays.asList(parts[1].split(",")).contains("memory")) {
        return parts[2];
      }
      if (parts[0].equals("0")) {
        unified = parts[2];
      }
    }
    return unified;
  }

  /** VmRSS of the process in bytes, 0 if it exited or has none. */
  static long rssOf(long pid) {
    return statusKb(Path.of("/proc", Long.toString(pid), "status"), "VmRSS:") * 1024;
  }

  private static long jvmRss() {
    return statusKb(Path.of("/proc/self/status"), "VmRSS:") * 1024;
  }

  /** MemAvailable and the kernel's own allocations, from /proc/meminfo, in bytes. */
  private static Map<String, Long> meminfo() throws IOException {
    Map<String, Long> m = new LinkedHashMap<>();
    for (String key : MEMINFO_KEYS) {
      long kb = statusKb(Path.of("/proc/meminfo"), key + ":");
      if (key.equals("MemAvailable") && kb == 0) {
        throw new IOException("no MemAvailable in /proc/meminfo");
      }
      m.put(key, kb * 1024);
    }
    return m;
  }

  /** The value in kB of the line {@code key} of a /proc status-like file, or 0. */
  private static long statusKb(Path file, String key) {
    try {
      for (String line : Files.readAllLines(file)) {
        if (line.startsWith(key)) {
          return Long.parseLong(line.substring(key.length()).strip().split("\\s+")[0]);
        }
      }
    } catch (IOException | NumberFormatException e) {
      // gone
    }
    return 0;
  }

  // ---- figures ----

  /** Nearest-rank percentile, as {@link Stats#percentile}. */
  static long percentile(long[] values, double p) {
    long[] sorted = values.clone();
    Arrays.sort(sorted);
    int rank = (int) Math.ceil(p * sorted.length / 100.0);
    return sorted[Math.max(rank, 1) - 1];
  }

  static double mib(long bytes) {
    return bytes / (1024.0 * 1024.0);
  }
}
