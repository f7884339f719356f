package dev.sandbox4j.docker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.addr.Cidr;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.ports.PortProxy;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.runtime.internal.util.CodeWatch;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The process that serves one daemon's docker sandboxes from the host, also when no JVM of the user
 * runs: their egress proxy and DNS stub on the {@link DockerNetwork}'s gateway, their port URLs and
 * forwards, and the {@link BridgeFirewall}. One per {@link DockerHome}, as the local engine's
 * supervisor is per state directory, started the same way ({@code setsid java ...}, its lock {@code
 * supervisor.lock}, its log {@code supervisor.log} in the home).
 *
 * <p>It runs without docker-java (a lighter JVM, and nothing of the client's to load): the daemon
 * is asked with plain calls ({@link DaemonSocket#call}).
 *
 * <p><b>Who asks the proxy.</b> A connection's source address is a container's address on the
 * network, which the daemon is asked for on each request (one call, a few milliseconds): an address
 * Docker gave to another container since is never mistaken for the old one's, whose policy (and
 * header secrets) it must not get. The container's name gives the sandbox, and its directory the
 * policy; a source that is no sandbox of ours, or one without a policy, is refused.
 *
 * <p><b>Timers.</b> Every {@link #SCAN} it enforces the timers of the sandboxes that have them
 * ({@link DockerTimers}), as the engine's supervisor does.
 *
 * <p><b>Exit.</b> When the home has had no sandbox directory for {@link #LINGER}. Every {@link
 * #GC_EVERY} it removes the directories of sandboxes whose container is gone (removed with the
 * docker CLI, say), once older than {@link #GC_AGE} (a create makes the directory just before its
 * container).
 */
final class DockerSupervisor {
  static final String LOCK = Supervisor.LOCK;
  static final String LOG_FILE = Supervisor.LOG_FILE;
  private static final Duration SCAN = Duration.ofSeconds(1);
  private static final Duration LINGER = Duration.ofSeconds(10);
  private static final Duration GC_EVERY = Duration.ofSeconds(30);
  private static final Duration GC_AGE = Duration.ofMinutes(1);
  private static final Map<Path, Process> SPAWNED = new ConcurrentHashMap<>();
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private final URI host;
  private final DockerHome home;

  private DockerSupervisor(URI host, DockerHome home) {
    this.host = host;
    this.home = home;
  }

  /** {@code DockerSupervisor HOME DOCKER_HOST}. */
  public static void main(String[] args) throws Exception {
    DockerHome home = DockerHome.at(Path.of(args[0]));
    URI host = URI.create(args[1]);
    Optional<FileLock> lock;
    try {
      lock = FileLock.tryAcquireExisting(home.dir().resolve(LOCK));
    } catch (NoSuchFileException gone) {
      return; // the home is gone
    }
    if (lock.isEmpty()) {
      return; // another one serves this daemon
    }
    String pid = Long.toString(ProcessHandle.current().pid());
    say("docker supervisor " + pid + " started for " + host + " in " + home.dir());
    String exit;
    try (FileLock held = lock.get()) {
      exit = new DockerSupervisor(host, home).run();
    }
    say("docker supervisor " + pid + " exits: " + exit);
  }

  private String run() throws InterruptedException {
    CodeWatch code = new CodeWatch(classPath());
    Network served = null;
    EgressProxy proxy = null;
    NoNames names = null;
    long emptySince = -1;
    long lastGc = 0;
    try (PortProxy ports = new PortProxy(new DockerPorts(host, home), DockerSupervisor::say)) {
      while (true) {
        if (code.replacedAndSettled()) {
          spawnQuietly(home, host); // it waits for this one's lock
          return "its jars were rebuilt or replaced; a supervisor from the new ones takes over";
        }
        ports.start();
        Network net = null;
        try {
          net = network();
        } catch (IOException | RuntimeException e) {
          sayOnce("cannot serve the egress network yet: " + e);
        }
        if (proxy != null && (net == null || !net.equals(served))) {
          // the network was removed, or made anew with another gateway: serve the new one
          proxy.close();
          names.close();
          proxy = null;
          names = null;
        }
        if (proxy == null && net != null) {
          try {
            BridgeFirewall.refresh(host);
            Cidr subnet = Cidr.parse(net.subnet());
            proxy =
                EgressProxy.builder(this::policyOf)
                    .home(home.dir())
                    .bind(net.gateway(), DockerNetwork.PROXY_PORT)
                    .notPublic(subnet::contains)
                    .start();
            names = NoNames.bind(net.gateway(), DockerNetwork.DNS_PORT);
            served = net;
            say("egress proxy on " + proxy.address() + ", DNS stub on port 53 there");
          } catch (IOException | RuntimeException e) {
            if (proxy != null) {
              proxy.close();
              proxy = null;
            }
            sayOnce("cannot serve the egress network yet: " + e);
          }
        }
        enforceTimers();
        if (System.nanoTime() - lastGc > GC_EVERY.toNanos()) {
          lastGc = System.nanoTime();
          removeOrphanDirectories();
          Timers.gcTombstones(home.dir());
        }
        if (home.anySandboxes()) {
          emptySince = -1;
        } else if (emptySince < 0) {
          emptySince = System.nanoTime();
        } else if (System.nanoTime() - emptySince >= LINGER.toNanos()) {
          return "the daemon has no docker sandboxes with state here";
        }
        Thread.sleep(SCAN.toMillis());
      }
    } finally {
      if (proxy != null) {
        proxy.close();
      }
      if (names != null) {
        names.close();
      }
    }
  }

  // ---- timers ---------------------------------------------------------------------------------

  private record CpuSample(long usageMicros, long atNanos) {}

  private final Map<String, CpuSample> cpu = new java.util.HashMap<>();
  private final Cgroups cgroups = Cgroups.detect("docker");

  /**
   * One pass over the sandboxes with timers, as the engine's supervisor does it ({@link
   * Supervisor}): a passed deadline ends one (a tombstone saying why, then its container removed);
   * a busy one (an exec running in it, more than {@link #BUSY_CPU} CPUs used since the last pass,
   * or a process runnable at the pass) is stamped active; one idle for its idle timeout ends; one
   * idle for its auto-suspend timeout is paused, and unpaused at once if an operation stamped it
   * meanwhile.
   */
  private void enforceTimers() {
    List<Path> dirs;
    try (var list = Files.list(home.sandboxes())) {
      dirs = list.toList();
    } catch (IOException e) {
      return; // no sandboxes
    }
    Set<String> seen = new HashSet<>();
    for (Path dir : dirs) {
      String id = dir.getFileName().toString();
      Optional<Timers.Settings> settings =
          DockerHome.isId(id) ? Timers.read(dir) : Optional.empty();
      if (settings.isEmpty()) {
        continue;
      }
      seen.add(id);
      try {
        enforce(id, dir, settings.get());
      } catch (IOException | RuntimeException e) {
        say("cannot enforce the timers of docker:" + id + ": " + e);
      }
    }
    cpu.keySet().retainAll(seen);
  }

  private static final double BUSY_CPU = 0.10;

  private void enforce(String id, Path dir, Timers.Settings s) throws IOException {
    Instant now = Instant.now();
    Optional<String> deadline = s.deadlinePassed(now);
    if (deadline.isPresent()) {
      end(id, deadline.get());
      return;
    }
    DaemonSocket.Reply r = DaemonSocket.call(host, "GET", "/containers/sandbox4j-" + id + "/json");
    if (r.status() != 200) {
      return; // being created, or gone (removeOrphanDirectories)
    }
    JsonNode container = JSON.readTree(r.body());
    JsonNode state = container.path("State");
    boolean running = state.path("Running").asBoolean() && !state.path("Paused").asBoolean();
    boolean execRunning = running && container.path("ExecIDs").size() > 0;
    long init = state.path("Pid").asLong();
    Boolean cpuBusy = running ? cpuBusy(id, init) : Boolean.FALSE;
    if (!running) {
      cpu.remove(id);
    }
    // A runnable process wants the CPU even when a loaded host gives it less than BUSY_CPU: the
    // engine's supervisor counts it as busy too (Supervisor.enforce)
    if (execRunning
        || Boolean.TRUE.equals(cpuBusy)
        || (running && init > 0 && cgroups.anyRunnableInGroupOf(init))) {
      Timers.touch(dir);
      return;
    }
    if (cpuBusy == null) {
      return; // first look at its CPU: judge from the next pass
    }
    Instant last = Timers.lastActivity(dir, Instant.parse(s.created()));
    Duration idle = Duration.between(last, now);
    if (s.idleTimeoutMillis() > 0 && idle.compareTo(s.idle()) >= 0) {
      end(id, "it was idle for its idleTimeout of " + Timers.human(s.idle()));
      return;
    }
    if (s.autoSuspendMillis() > 0 && running && idle.compareTo(s.autoSuspend()) >= 0) {
      // never while an exec is starting in it, from any process: that can freeze it for good
      if (!PauseLock.tryPausing(
          dir, () -> DaemonSocket.call(host, "POST", "/containers/sandbox4j-" + id + "/pause"))) {
        return; // an exec is starting: it is not idle, and the next pass looks again
      }
      cpu.remove(id);
      say("paused docker:" + id + ": idle for " + Timers.human(s.autoSuspend()));
      if (Timers.lastActivity(dir, last).isAfter(last)) {
        DaemonSocket.call(host, "POST", "/containers/sandbox4j-" + id + "/unpause");
        say("unpaused docker:" + id + " again: it was used while being paused");
      }
    }
  }

  /** Ends sandbox {@code id}: a tombstone saying why, its container removed, its state too. */
  private void end(String id, String why) throws IOException {
    Timers.leaveTombstone(home.dir(), id, why);
    DaemonSocket.Reply r =
        DaemonSocket.call(host, "DELETE", "/containers/sandbox4j-" + id + "?force=1&v=1");
    if (r.status() != 204 && r.status() != 404) {
      throw new IOException(
          "the daemon did not remove its container: " + r.status() + " " + r.body());
    }
    home.removeSandbox(id);
    cpu.remove(id);
    say("ended docker:" + id + ": " + why);
  }

  /**
   * Whether the container whose init is host process {@code pid} used more than {@link #BUSY_CPU}
   * since the last pass, from its cgroup's CPU counter ({@link Cgroups#cpuUsageMicrosOfProcess});
   * null at the first pass, false when unreadable.
   */
  private Boolean cpuBusy(String id, long pid) {
    OptionalLong usage = pid > 0 ? cgroups.cpuUsageMicrosOfProcess(pid) : OptionalLong.empty();
    long at = System.nanoTime();
    if (usage.isEmpty()) {
      cpu.remove(id);
      return Boolean.FALSE; // not running, or unreadable: only its execs tell
    }
    CpuSample previous = cpu.put(id, new CpuSample(usage.getAsLong(), at));
    if (previous == null || at <= previous.atNanos()) {
      return null;
    }
    double cpus = (usage.getAsLong() - previous.usageMicros()) * 1000.0 / (at - previous.atNanos());
    return cpus > BUSY_CPU;
  }

  private record Network(InetAddress gateway, String subnet) {}

  private Network network() throws IOException {
    DaemonSocket.Reply r = DaemonSocket.call(host, "GET", "/networks/" + DockerNetwork.NAME);
    if (r.status() != 200) {
      throw new IOException("the daemon has no network " + DockerNetwork.NAME + " yet");
    }
    JsonNode config = JSON.readTree(r.body()).path("IPAM").path("Config").path(0);
    return new Network(
        InetAddress.ofLiteral(config.path("Gateway").asText()), config.path("Subnet").asText());
  }

  /** The policy of the sandbox whose container has address {@code source} now; else empty. */
  private Optional<EgressPolicy> policyOf(InetAddress source) {
    try {
      DaemonSocket.Reply r = DaemonSocket.call(host, "GET", "/networks/" + DockerNetwork.NAME);
      if (r.status() != 200) {
        return Optional.empty();
      }
      Iterator<JsonNode> containers = JSON.readTree(r.body()).path("Containers").elements();
      while (containers.hasNext()) {
        JsonNode c = containers.next();
        String address = c.path("IPv4Address").asText("");
        int slash = address.indexOf('/');
        if (slash > 0
            && InetAddress.ofLiteral(address.substring(0, slash)).equals(source)
            && c.path("Name").asText("").startsWith("sandbox4j-")) {
          String id = c.path("Name").asText().substring("sandbox4j-".length());
          return DockerHome.isId(id) ? home.policy(id) : Optional.empty();
        }
      }
      return Optional.empty();
    } catch (IOException | RuntimeException e) {
      say("cannot look up the sandbox at " + source.getHostAddress() + ": " + e);
      return Optional.empty();
    }
  }

  /** Removes the directories of sandboxes whose container is gone, once they are old enough. */
  private void removeOrphanDirectories() {
    Set<String> alive = new HashSet<>();
    try {
      DaemonSocket.Reply r =
          DaemonSocket.call(
              host,
              "GET",
              "/containers/json?all=1&filters="
                  + java.net.URLEncoder.encode(
                      "{\"label\":[\"" + DockerSandbox.LABEL_ID + "\"]}", StandardCharsets.UTF_8));
      if (r.status() != 200) {
        return;
      }
      for (JsonNode c : JSON.readTree(r.body())) {
        alive.add(c.path("Labels").path(DockerSandbox.LABEL_ID).asText(""));
      }
      Instant old = Instant.now().minus(GC_AGE);
      try (var dirs = Files.list(home.sandboxes())) {
        for (Path dir : dirs.toList()) {
          String id = dir.getFileName().toString();
          FileTime made = Files.getLastModifiedTime(dir);
          if (DockerHome.isId(id) && !alive.contains(id) && made.toInstant().isBefore(old)) {
            home.removeSandbox(id);
            say("removed the state of docker:" + id + ": its container is gone");
          }
        }
      }
    } catch (NoSuchFileException e) {
      // no sandboxes directory
    } catch (IOException | RuntimeException e) {
      say("cannot look for gone sandboxes: " + e);
    }
  }

  private static void say(String line) {
    OUT.println(Instant.now() + " " + line);
  }

  private String lastSaid;

  /** {@link #say}, unless it is what was said last this way (a failure seen every scan). */
  private void sayOnce(String line) {
    if (!line.equals(lastSaid)) {
      lastSaid = line;
      say(line);
    }
  }

  // ---- starting one ---------------------------------------------------------------------------

  /**
   * Starts the supervisor of {@code home} for the daemon at {@code host} unless one runs. Never
   * fails: one that cannot start is logged, and the next create or use tries again.
   */
  static void ensureRunning(DockerHome home, URI host) {
    try {
      PrivateFiles.createPrivateDirectories(home.dir());
      Path lockFile = home.dir().resolve(LOCK);
      Optional<FileLock> free = FileLock.tryAcquire(lockFile);
      if (free.isEmpty()) {
        return; // one runs
      }
      free.get().close();
      Process last = SPAWNED.get(home.dir());
      if (last != null && last.isAlive()) {
        return; // started by this JVM, and not holding the lock yet (or losing it to another)
      }
      SPAWNED.put(home.dir(), spawn(home, host));
    } catch (IOException | RuntimeException e) {
      System.getLogger(DockerSupervisor.class.getName())
          .log(System.Logger.Level.WARNING, "cannot start the supervisor of " + home.dir(), e);
    }
  }

  /** Whether the supervisor of {@code home} runs (holds its lock). */
  static boolean isRunning(DockerHome home) {
    return Supervisor.isRunning(home.dir());
  }

  private static void spawnQuietly(DockerHome home, URI host) {
    try {
      spawn(home, host);
    } catch (IOException e) {
      say("cannot start a new supervisor: " + e);
    }
  }

  private static Process spawn(DockerHome home, URI host) throws IOException {
    return Supervisor.spawnJava(
        home.dir(),
        classPath(),
        DockerSupervisor.class.getName(),
        List.of(home.dir().toString(), host.toString()));
  }

  /** The runtime's class path and this module's jar. */
  private static String classPath() {
    return Supervisor.classPath(List.of(DockerSupervisor.class));
  }
}
