package dev.sandbox4j.bench;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * What the host holds at one moment, as {@link DensityBench} counts it between sample points: the
 * kernel's memory ({@code /proc/meminfo}), its process table (processes, threads, by name), mounts,
 * loop devices, network namespaces and interfaces, cgroups per controller and open files. Read from
 * {@code /proc} and {@code /sys} only; every figure is host-wide unless its name says otherwise, so
 * other work on the machine counts too.
 *
 * @param meminfo the {@link #MEMINFO_KEYS} of {@code /proc/meminfo}, in bytes
 * @param processes thread-group leaders in {@code /proc} (kernel threads included)
 * @param threads every task (thread) of the host: what {@code pid_max} bounds
 * @param pidMax {@code /proc/sys/kernel/pid_max}
 * @param processesByName processes per name, digits replaced by {@code N} ({@code jbd2/loopN-N})
 * @param mounts lines of the host mount namespace's {@code mountinfo} (the bench's own)
 * @param loopDevices loop devices bound to a file ({@code /sys/block/loop*}/loop/backing_file)
 * @param netns names under {@code /run/netns} ({@code ip netns})
 * @param interfaces network interfaces of the host's namespace
 * @param bridgePorts interfaces of the host's namespace enslaved to a bridge
 * @param cgroups {@code num_cgroups} per controller, from {@code /proc/cgroups}
 * @param openFiles allocated file handles of the host ({@code /proc/sys/fs/file-nr})
 * @param benchFds descriptors the bench JVM holds
 */
record HostCensus(
    Map<String, Long> meminfo,
    int processes,
    long threads,
    long pidMax,
    Map<String, Integer> processesByName,
    int mounts,
    int loopDevices,
    int netns,
    int interfaces,
    int bridgePorts,
    Map<String, Long> cgroups,
    long openFiles,
    int benchFds) {

  static final List<String> MEMINFO_KEYS =
      List.of(
          "MemTotal",
          "MemAvailable",
          "MemFree",
          "Slab",
          "SReclaimable",
          "SUnreclaim",
          "KernelStack",
          "PageTables",
          "Percpu");

  private static final Pattern DIGITS = Pattern.compile("[0-9]+");
  private static final Path PROC = Path.of("/proc");

  /** Takes the census (a few hundred ms with tens of thousands of processes). */
  static HostCensus take() throws IOException {
    Map<String, Integer> byName = new TreeMap<>();
    int processes = 0;
    try (DirectoryStream<Path> procs = Files.newDirectoryStream(PROC, HostCensus::isPid)) {
      for (Path proc : procs) {
        String comm;
        try {
          comm = read(proc.resolve("comm")).strip();
        } catch (IOException e) {
          continue; // exited meanwhile
        }
        processes++;
        byName.merge(DIGITS.matcher(comm).replaceAll("N"), 1, Integer::sum);
      }
    }
    return new HostCensus(
        readMeminfo(),
        processes,
        tasksInUse(),
        procLong("/proc/sys/kernel/pid_max"),
        byName,
        Files.readAllLines(Path.of("/proc/self/mountinfo")).size(),
        loopDevices(null),
        countEntries(Path.of("/run/netns")),
        countEntries(Path.of("/sys/class/net")),
        readBridgePorts(),
        readCgroups(),
        Long.parseLong(read(Path.of("/proc/sys/fs/file-nr")).strip().split("\\s+")[0]),
        countEntries(Path.of("/proc/self/fd")));
  }

  /** /proc/meminfo's {@link #MEMINFO_KEYS}, in bytes. */
  static Map<String, Long> readMeminfo() throws IOException {
    Map<String, Long> m = new LinkedHashMap<>();
    for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
      int colon = line.indexOf(':');
      if (colon > 0 && MEMINFO_KEYS.contains(line.substring(0, colon))) {
        String[] value = line.substring(colon + 1).strip().split("\\s+");
        m.put(line.substring(0, colon), Long.parseLong(value[0]) * 1024);
      }
    }
    if (!m.containsKey("MemAvailable")) {
      throw new IOException("no MemAvailable in /proc/meminfo");
    }
    return m;
  }

  /** MemAvailable in bytes: what the safety check reads before every create. */
  static long memAvailable() throws IOException {
    return readMeminfo().get("MemAvailable");
  }

  /** Every task of the host: the denominator of /proc/loadavg's fourth field ("1/352"). */
  static long tasksInUse() throws IOException {
    String field = read(Path.of("/proc/loadavg")).strip().split("\\s+")[3];
    return Long.parseLong(field.substring(field.indexOf('/') + 1));
  }

  /**
   * The text of a /proc or /sys file. Not {@code Files.readString}: it sizes its read by the file's
   * size, which such files report as 0, and so returned "3" of pid_max's "32768" here (JDK 25).
   */
  static String read(Path file) throws IOException {
    return String.join("\n", Files.readAllLines(file));
  }

  static long procLong(String file) throws IOException {
    return Long.parseLong(read(Path.of(file)).strip());
  }

  /** Loop devices bound to a file; only those whose file is under {@code under}, unless null. */
  static int loopDevices(Path under) throws IOException {
    int n = 0;
    try (DirectoryStream<Path> devices =
        Files.newDirectoryStream(
            Path.of("/sys/block"), p -> p.getFileName().toString().startsWith("loop"))) {
      for (Path device : devices) {
        Path backing = device.resolve("loop/backing_file");
        try {
          String file = read(backing).strip();
          if (under == null || file.startsWith(under.toString() + "/")) {
            n++;
          }
        } catch (IOException e) {
          // unbound (no loop/ directory) or freed meanwhile
        }
      }
    }
    return n;
  }

  /** Lines of the host mount table that name a path under {@code under}. */
  static List<String> mountsUnder(Path under) throws IOException {
    String prefix = under.toString() + "/";
    return Files.readAllLines(Path.of("/proc/self/mountinfo")).stream()
        .filter(line -> line.contains(" " + prefix) || line.contains(" " + under + " "))
        .toList();
  }

  /** Names in {@code dir} (0 if it does not exist). */
  static int countEntries(Path dir) throws IOException {
    if (!Files.isDirectory(dir)) {
      return 0;
    }
    int n = 0;
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
      for (Path ignored : entries) {
        n++;
      }
    }
    return n;
  }

  /** Names in {@code dir} that start with {@code prefix}. */
  static List<String> entriesStartingWith(Path dir, String prefix) throws IOException {
    if (!Files.isDirectory(dir)) {
      return List.of();
    }
    try (var entries = Files.list(dir)) {
      return entries
          .map(p -> p.getFileName().toString())
          .filter(name -> name.startsWith(prefix))
          .sorted()
          .toList();
    }
  }

  private static int readBridgePorts() throws IOException {
    int n = 0;
    try (DirectoryStream<Path> links = Files.newDirectoryStream(Path.of("/sys/class/net"))) {
      for (Path link : links) {
        if (Files.exists(link.resolve("brport"))) {
          n++;
        }
      }
    }
    return n;
  }

  /** num_cgroups per controller ({@code /proc/cgroups}: subsys hierarchy num_cgroups enabled). */
  private static Map<String, Long> readCgroups() throws IOException {
    Map<String, Long> m = new TreeMap<>();
    for (String line : Files.readAllLines(Path.of("/proc/cgroups"))) {
      if (line.startsWith("#")) {
        continue;
      }
      String[] f = line.split("\\s+");
      if (f.length >= 3) {
        m.put(f[0], Long.parseLong(f[2]));
      }
    }
    return m;
  }

  private static boolean isPid(Path p) {
    String name = p.getFileName().toString();
    return !name.isEmpty() && name.chars().allMatch(Character::isDigit);
  }

  /**
   * What the bench's own sandboxes hold, counted by name so that other work on the host does not
   * count: cgroups named by a sandbox id (all controllers), tasks in their pids cgroups, loop
   * devices and mounts of files under the home (not counting {@code disks/spare-*}: disks this JVM
   * made ahead, two per size, in no mount table), network namespaces and host interfaces with the
   * home's hashed prefix, and the kernel's journal threads ({@code jbd2/loopN-8}) of its loops.
   */
  record Own(
      int sandboxes,
      int cgroups,
      long sandboxTasks,
      int loopDevices,
      int spareLoopDevices,
      int mounts,
      int netns,
      int veths,
      int journalThreads) {

    static Own take(Path home, java.util.Collection<String> ids, String netnsPrefix)
        throws IOException {
      int cgroups = 0;
      long tasks = 0;
      // Only the home's own parent (sandbox4j-<hash>) under each controller: a host where tests
      // made many homes has a thousand such parents per controller.
      List<Path> parents = homeParentCgroups(ids);
      for (String id : ids) {
        for (Path parent : parents) {
          Path cgroup = parent.resolve(id);
          if (Files.isDirectory(cgroup)) {
            cgroups++;
            if (parent.getParent().getFileName().toString().equals("pids")) {
              try {
                tasks += Long.parseLong(read(cgroup.resolve("pids.current")).strip());
              } catch (IOException | NumberFormatException e) {
                // removed meanwhile
              }
            }
          }
        }
      }
      String prefix = home + "/";
      String spares = home.resolve("disks") + "/spare-";
      int loops = 0;
      int spareLoops = 0;
      java.util.Set<String> ownLoops = new java.util.HashSet<>();
      try (DirectoryStream<Path> devices =
          Files.newDirectoryStream(
              Path.of("/sys/block"), p -> p.getFileName().toString().startsWith("loop"))) {
        for (Path device : devices) {
          String file;
          try {
            file = read(device.resolve("loop/backing_file")).strip();
          } catch (IOException e) {
            continue;
          }
          if (file.startsWith(spares)) {
            spareLoops++;
          } else if (file.startsWith(prefix)) {
            loops++;
            ownLoops.add(device.getFileName().toString());
          }
        }
      }
      int journals = 0;
      try (DirectoryStream<Path> procs = Files.newDirectoryStream(PROC, HostCensus::isPid)) {
        for (Path proc : procs) {
          try {
            String comm = read(proc.resolve("comm")).strip();
            // jbd2/loop12-8: the journal thread of the ext4 on loop12
            if (comm.startsWith("jbd2/loop")) {
              int dash = comm.indexOf('-');
              if (dash > 0 && ownLoops.contains(comm.substring("jbd2/".length(), dash))) {
                journals++;
              }
            }
          } catch (IOException e) {
            // exited meanwhile
          }
        }
      }
      int netns = 0;
      int veths = 0;
      if (netnsPrefix != null) {
        netns = entriesStartingWith(Path.of("/run/netns"), netnsPrefix).size();
        veths = entriesStartingWith(Path.of("/sys/class/net"), vethPrefix(netnsPrefix)).size();
      }
      return new Own(
          ids.size(),
          cgroups,
          tasks,
          loops,
          spareLoops,
          mountsUnder(home).size(),
          netns,
          veths,
          journals);
    }

    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("sandboxes", sandboxes);
      m.put("cgroups_all_controllers", cgroups);
      m.put("tasks_in_sandbox_cgroups", sandboxTasks);
      m.put("loop_devices", loopDevices);
      m.put("spare_loop_devices_of_the_bench_jvm", spareLoopDevices);
      m.put("mounts", mounts);
      m.put("netns", netns);
      m.put("veths", veths);
      m.put("jbd2_journal_threads", journalThreads);
      return m;
    }
  }

  /**
   * The parent cgroup of the sandboxes {@code ids} under every controller: the name of the first
   * parent found holding one of them (a home's sandboxes share one), remembered once found, under
   * each controller. Empty while none is found.
   */
  static List<Path> homeParentCgroups(java.util.Collection<String> ids) throws IOException {
    String name = HOME_PARENT.get();
    if (name == null) {
      List<Path> pids = new java.util.ArrayList<>();
      for (Path parent : sandboxParentCgroups()) {
        if (parent.getParent().getFileName().toString().equals("pids")) {
          pids.add(parent);
        }
      }
      search:
      for (String id : ids) {
        for (Path parent : pids) {
          if (Files.isDirectory(parent.resolve(id))) {
            name = parent.getFileName().toString();
            HOME_PARENT.set(name);
            break search;
          }
        }
        break; // one sandbox decides; if it is gone, look again next time
      }
    }
    if (name == null) {
      return List.of();
    }
    List<Path> parents = new java.util.ArrayList<>();
    try (var controllers = Files.list(Path.of("/sys/fs/cgroup"))) {
      for (Path controller : controllers.toList()) {
        if (Files.isDirectory(controller.resolve(name))) {
          parents.add(controller.resolve(name));
        }
      }
    }
    return parents;
  }

  private static final java.util.concurrent.atomic.AtomicReference<String> HOME_PARENT =
      new java.util.concurrent.atomic.AtomicReference<>();

  /**
   * The parent cgroups of sandboxes, under every controller: {@code sandbox4j} and one {@code
   * sandbox4j-<home hash>} per home ({@code /sys/fs/cgroup/pids/sandbox4j-8232cda9/<id>}).
   */
  static List<Path> sandboxParentCgroups() throws IOException {
    List<Path> parents = new java.util.ArrayList<>();
    try (var controllers = Files.list(Path.of("/sys/fs/cgroup"))) {
      for (Path controller : controllers.toList()) {
        if (!Files.isDirectory(controller)) {
          continue;
        }
        parents.addAll(
            entriesStartingWith(controller, "sandbox4j").stream()
                .map(controller::resolve)
                .filter(Files::isDirectory)
                .toList());
      }
    }
    return parents;
  }

  /**
   * The host side of a sandbox's veth is {@code s4<hash>-<slot>}, its namespace {@code
   * s4j-<hash>-<id>}.
   */
  static String vethPrefix(String netnsPrefix) {
    return "s4" + netnsPrefix.substring("s4j-".length());
  }

  /** The process's resident memory, threads and descriptors, or null once it is gone. */
  record ProcessFigures(long pid, long rssBytes, int threads, int fds, long cpuTicks) {
    Map<String, Object> toJson() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("pid", pid);
      m.put("rss_bytes", rssBytes);
      m.put("threads", threads);
      m.put("fds", fds);
      return m;
    }
  }

  /** Figures of process {@code pid}, or null if it does not exist. */
  static ProcessFigures process(long pid) {
    Path dir = PROC.resolve(Long.toString(pid));
    try {
      long rss = 0;
      int threads = 0;
      for (String line : Files.readAllLines(dir.resolve("status"))) {
        if (line.startsWith("VmRSS:")) {
          rss = Long.parseLong(line.substring(6).strip().split("\\s+")[0]) * 1024;
        } else if (line.startsWith("Threads:")) {
          threads = Integer.parseInt(line.substring(8).strip());
        }
      }
      return new ProcessFigures(pid, rss, threads, countEntries(dir.resolve("fd")), cpuTicks(pid));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * utime + stime of {@code pid} in clock ticks (fields 14 and 15 of {@code /proc/PID/stat},
   * counted after the parenthesized name, which may hold spaces).
   */
  static long cpuTicks(long pid) throws IOException {
    String stat = read(PROC.resolve(Long.toString(pid)).resolve("stat"));
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    // f[0] is field 3 (state): utime is field 14, stime field 15
    return Long.parseLong(f[11]) + Long.parseLong(f[12]);
  }

  Map<String, Object> toJson() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("meminfo_bytes", meminfo);
    m.put("processes", processes);
    m.put("threads", threads);
    m.put("pid_max", pidMax);
    m.put("mounts", mounts);
    m.put("loop_devices", loopDevices);
    m.put("netns", netns);
    m.put("interfaces", interfaces);
    m.put("bridge_ports", bridgePorts);
    m.put("cgroups", cgroups);
    m.put("open_files", openFiles);
    m.put("bench_fds", benchFds);
    m.put("processes_by_name", processesByName);
    return m;
  }
}
