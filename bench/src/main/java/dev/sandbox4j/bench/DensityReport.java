package dev.sandbox4j.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;

/** {@link DensityBench}'s figures: its table rows, the cost per sandbox, the teardown check. */
final class DensityReport {

  private static final double MIB = 1024.0 * 1024.0;

  private DensityReport() {}

  /** One line of the table per sample point. */
  static final class Row {
    static final String HEADER =
        String.format(
            Locale.ROOT,
            "%8s %6s %9s %9s %9s %9s %9s %9s %9s %8s %7s %7s %7s",
            "sandbox",
            "load",
            "create50",
            "create99",
            "exec50",
            "exec99",
            "list50",
            "cli_ls50",
            "sup_cpu%",
            "avail_G",
            "tasks",
            "mounts",
            "loops");

    private Row() {}

    static String of(DensityBench.Point p) {
      return String.format(
          Locale.ROOT,
          "%8d %6.2f %9s %9s %9s %9s %9s %9s %9s %8.2f %7d %7d %7d",
          p.sandboxes(),
          p.loadAverage(),
          ms(p.create(), true),
          ms(p.create(), false),
          ms(p.exec(), true),
          ms(p.exec(), false),
          ms(p.engineList(), true),
          ms(p.cliLs(), true),
          p.supervisorCpuPercent() == null
              ? "-"
              : String.format(Locale.ROOT, "%.2f", p.supervisorCpuPercent()),
          p.census().meminfo().get("MemAvailable") / (double) (1L << 30),
          p.census().threads(),
          p.census().mounts(),
          p.census().loopDevices());
    }

    private static String ms(Stats s, boolean median) {
      if (s == null) {
        return "-";
      }
      return String.format(Locale.ROOT, "%.1f", median ? s.p50() : s.p99());
    }
  }

  /**
   * What the host pays per idle sandbox: the difference between the census before the first sandbox
   * and the one at the highest count, divided by that count. MemAvailable's drop is given whole and
   * less what the bench's and the supervisor's JVMs grew by (they exist once per home, not per
   * sandbox).
   */
  record PerSandbox(
      int sandboxes,
      HostCensus before,
      HostCensus after,
      long benchRssGrowth,
      long supervisorRss,
      HostCensus.Own own) {

    static PerSandbox of(
        HostCensus before,
        HostCensus after,
        int sandboxes,
        HostCensus.ProcessFigures benchBefore,
        HostCensus.ProcessFigures benchAfter,
        DensityBench.Point last) {
      long growth =
          benchBefore == null || benchAfter == null
              ? 0
              : benchAfter.rssBytes() - benchBefore.rssBytes();
      long supervisor =
          last == null || last.supervisor() == null ? 0 : last.supervisor().rssBytes();
      return new PerSandbox(
          sandboxes, before, after, growth, supervisor, last == null ? null : last.own());
    }

    private long memDelta(String key) {
      return after.meminfo().getOrDefault(key, 0L) - before.meminfo().getOrDefault(key, 0L);
    }

    private double per(double total) {
      return sandboxes == 0 ? 0 : total / sandboxes;
    }

    long memAvailableDrop() {
      return -memDelta("MemAvailable");
    }

    long memAvailableDropLessJvms() {
      return memAvailableDrop() - benchRssGrowth - supervisorRss;
    }

    /** Processes per name whose count changed, largest change first. */
    Map<String, Integer> processDelta() {
      Map<String, Integer> delta = new TreeMap<>();
      after.processesByName().forEach((k, v) -> delta.merge(k, v, Integer::sum));
      before.processesByName().forEach((k, v) -> delta.merge(k, -v, Integer::sum));
      delta.values().removeIf(v -> v == 0);
      Map<String, Integer> sorted = new LinkedHashMap<>();
      delta.entrySet().stream()
          .sorted(Map.Entry.<String, Integer>comparingByValue(Comparator.reverseOrder()))
          .forEach(e -> sorted.put(e.getKey(), e.getValue()));
      return sorted;
    }

    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("sandboxes", sandboxes);
      m.put("mem_available_drop_bytes", per(memAvailableDrop()));
      m.put(
          "mem_available_drop_less_bench_and_supervisor_jvms_bytes",
          per(memAvailableDropLessJvms()));
      m.put("bench_jvm_rss_growth_bytes", benchRssGrowth);
      m.put("supervisor_rss_bytes", supervisorRss);
      for (String key :
          List.of("Slab", "SReclaimable", "SUnreclaim", "KernelStack", "PageTables", "Percpu")) {
        m.put(key + "_growth_bytes", per(memDelta(key)));
      }
      m.put("processes", per(after.processes() - before.processes()));
      m.put("tasks", per(after.threads() - before.threads()));
      m.put("mounts", per(after.mounts() - before.mounts()));
      m.put("loop_devices", per(after.loopDevices() - before.loopDevices()));
      m.put("netns", per(after.netns() - before.netns()));
      m.put("interfaces", per(after.interfaces() - before.interfaces()));
      m.put("bridge_ports", per(after.bridgePorts() - before.bridgePorts()));
      m.put("open_files", per(after.openFiles() - before.openFiles()));
      m.put("bench_fds", per(after.benchFds() - before.benchFds()));
      Map<String, Object> cgroups = new LinkedHashMap<>();
      after
          .cgroups()
          .forEach(
              (controller, n) ->
                  cgroups.put(controller, per(n - before.cgroups().getOrDefault(controller, 0L))));
      m.put("cgroups", cgroups);
      m.put("process_count_change_by_name", processDelta());
      if (own != null && own.sandboxes() > 0) {
        Map<String, Object> mine = new LinkedHashMap<>();
        double n = own.sandboxes();
        mine.put("note", "counted by name: the bench's own sandboxes only");
        mine.put("cgroups_all_controllers", own.cgroups() / n);
        mine.put("tasks_in_sandbox_cgroups", own.sandboxTasks() / n);
        mine.put("loop_devices", own.loopDevices() / n);
        mine.put("mounts", own.mounts() / n);
        mine.put("netns", own.netns() / n);
        mine.put("veths", own.veths() / n);
        mine.put("jbd2_journal_threads", own.journalThreads() / n);
        m.put("own", mine);
      }
      m.put("pid_max", after.pidMax());
      m.put("tasks_in_use", after.threads());
      return m;
    }

    List<String> rows() {
      List<String> rows = new ArrayList<>();
      rows.add(String.format(Locale.ROOT, "host cost per idle sandbox (%d sandboxes):", sandboxes));
      rows.add(row("MemAvailable drop", per(memAvailableDrop()) / MIB, "MiB"));
      rows.add(
          row(
              "  less the bench's and the supervisor's JVMs",
              per(memAvailableDropLessJvms()) / MIB,
              "MiB"));
      rows.add(row("Slab growth", per(memDelta("Slab")) / MIB, "MiB"));
      rows.add(row("  of which SUnreclaim", per(memDelta("SUnreclaim")) / MIB, "MiB"));
      rows.add(row("KernelStack growth", per(memDelta("KernelStack")) / MIB, "MiB"));
      rows.add(row("PageTables growth", per(memDelta("PageTables")) / MIB, "MiB"));
      rows.add(row("Percpu growth", per(memDelta("Percpu")) / MIB, "MiB"));
      rows.add(
          row(
              "host processes (host-wide change)",
              per(after.processes() - before.processes()),
              ""));
      rows.add(row("tasks (pids)", per(after.threads() - before.threads()), ""));
      rows.add(row("mounts", per(after.mounts() - before.mounts()), ""));
      rows.add(row("loop devices", per(after.loopDevices() - before.loopDevices()), ""));
      rows.add(row("network namespaces", per(after.netns() - before.netns()), ""));
      rows.add(row("host interfaces (veths)", per(after.interfaces() - before.interfaces()), ""));
      rows.add(row("bridge ports", per(after.bridgePorts() - before.bridgePorts()), ""));
      rows.add(row("open files (host)", per(after.openFiles() - before.openFiles()), ""));
      rows.add(row("bench JVM fds", per(after.benchFds() - before.benchFds()), ""));
      after
          .cgroups()
          .forEach(
              (controller, n) -> {
                long d = n - before.cgroups().getOrDefault(controller, 0L);
                if (d != 0) {
                  rows.add(row("cgroups: " + controller, per(d), ""));
                }
              });
      if (own != null && own.sandboxes() > 0) {
        double n = own.sandboxes();
        rows.add(
            String.format(
                Locale.ROOT, "the bench's own sandboxes (%d), counted by name:", own.sandboxes()));
        rows.add(row("  tasks in their pids cgroups", own.sandboxTasks() / n, ""));
        rows.add(row("  jbd2 journal threads of their loops", own.journalThreads() / n, ""));
        rows.add(row("  cgroups (all controllers)", own.cgroups() / n, ""));
        rows.add(row("  loop devices", own.loopDevices() / n, ""));
        rows.add(row("  mounts under the home", own.mounts() / n, ""));
        rows.add(row("  network namespaces", own.netns() / n, ""));
        rows.add(row("  veths", own.veths() / n, ""));
      }
      rows.add(
          String.format(
              Locale.ROOT,
              "%-48s %d of pid_max %d",
              "tasks in use at the top",
              after.threads(),
              after.pidMax()));
      StringBuilder names = new StringBuilder();
      processDelta().entrySet().stream()
          .limit(8)
          .forEach(
              e -> names.append(String.format(Locale.ROOT, " %s %+d", e.getKey(), e.getValue())));
      rows.add(String.format(Locale.ROOT, "%-48s%s", "processes by name (change)", names));
      return rows;
    }

    private static String row(String label, double value, String unit) {
      return String.format(Locale.ROOT, "%-48s %10.3f %s", label, value, unit);
    }
  }

  /**
   * What is left on the host of the bench's sandboxes after it destroyed them: their cgroups (a
   * directory named by a sandbox id under any controller's {@code sandbox4j/}), mounts and loop
   * devices under the home, network namespaces and host interfaces with the home's hashed prefix,
   * and sandbox directories. Looked at until clean or for {@link #PATIENCE_MILLIS}: a destroyed
   * disk's unmount finishes on a background thread.
   */
  record Teardown(List<String> leftovers) {
    static final long PATIENCE_MILLIS = 15_000;

    boolean clean() {
      return leftovers.isEmpty();
    }

    static Teardown check(Path home, Set<String> ids, String netnsPrefix)
        throws IOException, InterruptedException {
      long deadline = System.nanoTime() + PATIENCE_MILLIS * 1_000_000;
      while (true) {
        List<String> left = look(home, ids, netnsPrefix);
        if (left.isEmpty() || System.nanoTime() > deadline) {
          return new Teardown(left);
        }
        Thread.sleep(500);
      }
    }

    private static List<String> look(Path home, Set<String> ids, String netnsPrefix)
        throws IOException {
      List<String> left = new ArrayList<>();
      HostCensus.Own own = HostCensus.Own.take(home, ids, netnsPrefix);
      if (own.cgroups() > 0) {
        left.add(own.cgroups() + " cgroup(s) named by a sandbox id");
      }
      if (own.sandboxTasks() > 0) {
        left.add(own.sandboxTasks() + " task(s) in the sandboxes' pids cgroups");
      }
      if (own.mounts() > 0) {
        left.add(own.mounts() + " mount(s) under " + home);
      }
      if (own.loopDevices() > 0) {
        left.add(own.loopDevices() + " loop device(s) backed by sandbox disks under " + home);
      }
      if (own.netns() > 0) {
        left.add(own.netns() + " network namespace(s) " + netnsPrefix + "*");
      }
      if (own.veths() > 0) {
        left.add(own.veths() + " interface(s) " + HostCensus.vethPrefix(netnsPrefix) + "*");
      }
      Path sandboxes = home.resolve("sandboxes");
      if (Files.isDirectory(sandboxes)) {
        try (Stream<Path> dirs = Files.list(sandboxes)) {
          long n = dirs.filter(p -> ids.contains(p.getFileName().toString())).count();
          if (n > 0) {
            left.add(n + " sandbox directorie(s) in " + sandboxes);
          }
        }
      }
      return left;
    }

    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("clean", clean());
      m.put("leftovers", leftovers);
      return m;
    }
  }
}
