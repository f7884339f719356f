package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Overlay;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.ports.PortUrls;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.io.IOException;
import java.io.InputStream;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The hostile-sandbox suite (issue 13): root inside a sandbox (sudo) tries to escape, in every
 * lifecycle state a sandbox can reach, and every attempt must be refused; and the confinement a
 * command gets (seccomp, capabilities, no_new_privs, user namespace mapping, cgroup limits) must be
 * the one a freshly created sandbox gives, read from the live processes, never from the config.
 *
 * <p>One list of attacks ({@code hostile.py}, run as root inside, plus nested user namespaces from
 * the shell) runs in each {@link State}. The confinement is read inside ({@code /proc/self/status},
 * {@code uid_map}, {@code gid_map}, every process's status) and from the host (the cgroups the
 * probe process is in, per {@code /proc/PID/cgroup}, with the limits of each ancestor).
 *
 * <p>The sandboxes live in a private state directory, because the last states simulate a host
 * reboot: every process of the home killed, its mounts, cgroups, runtime state, nftables table,
 * network namespace names and gateway address gone, then {@code setup}, {@code gc} and attach, as a
 * fresh JVM would. Live fork and hibernate need CRIU ({@code sandbox4j setup}); under {@code
 * CI=true} its absence fails those states.
 *
 * <p>This class attacks container sandboxes ({@code crun}); {@link GvisorHostileSandboxTest} runs
 * the same states and the same attacks against gVisor sandboxes. What differs between the two is
 * confined to the hooks below ({@link #isolation}, {@link #asRoot}, {@link #hostProcessOf}, ...),
 * each saying what its check means for a container.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class HostileSandboxTest {
  static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final ExecutorService THREADS = Executors.newVirtualThreadPerTaskExecutor();
  private static final long MEMORY = 1L << 30;
  private static final int PIDS = 512;
  private static final int NEIGHBOR_PORT = 7001;

  /** Every state a sandbox can be in when a command runs; the reboot last (it restarts all). */
  enum State {
    CREATE,
    EXEC,
    LIVE_FORK,
    FILES_FORK,
    SNAPSHOT_THEN_CREATE,
    STOP_THEN_START,
    SUSPEND_THEN_RESUME,
    HIBERNATE_THEN_WAKE,
    SUPERVISOR_RESTART,
    HOST_REBOOT_THEN_SETUP,
    HIBERNATED_ACROSS_A_HOST_REBOOT
  }

  /**
   * A sandbox to attack: {@code mapAtCreate} is the uid_map and gid_map it had when created, for
   * the states that keep the sandbox (a fork or a sandbox from a snapshot is a new one).
   */
  record Target(String what, Workspace ws, WorkspaceRef ref, Optional<String> mapAtCreate) {
    String id() {
      return ref.id();
    }
  }

  /** What confines a command, read from the live processes. */
  record View(
      Map<String, String> status,
      String uidMap,
      String gidMap,
      Map<String, Long> limits,
      Map<String, Map<String, String>> processes) {}

  @TempDir static Path temp;

  Path home;
  LocalSandbox sandboxes;
  private String probe;
  private String hostile;
  Target reference;
  private View baselineUser;
  private View baselineRoot;
  private Workspace neighbor;
  private WorkspaceRef neighborRef;
  private Path secretFile;
  private final String secret = "host-secret-" + UUID.randomUUID();
  private Process hostSleep;
  final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @BeforeAll
  void createTheReferenceSandboxAndANeighbor() throws Exception {
    requirePrerequisites();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    sandboxes = provider();
    probe = resource("probe.py");
    hostile = resource("hostile.py");
    secretFile = Files.createDirectories(temp.resolve("host-only")).resolve("secret.txt");
    Files.writeString(secretFile, secret);
    Files.writeString(home.resolve("secret.txt"), secret);
    hostSleep = new ProcessBuilder("sleep", "7777").start();

    reference = create("the reference sandbox");
    baselineUser = probe(reference, false);
    baselineRoot = probe(reference, true);
    for (View v : List.of(baselineUser, baselineRoot)) {
      assertFreshCommandConfinement(v);
      assertThat(v.limits())
          .as("a fresh sandbox is held to the memory, pids and CPU it was created with")
          .containsEntry("memory", MEMORY)
          .containsEntry("pids", (long) PIDS)
          .containsEntry("cpu", 1_000_000L);
    }
    neighbor = Workspace.of(sandboxes.newBackend());
    neighborRef = neighbor.open();
    startNeighborServer();
  }

  @AfterEach
  void destroyWhatTheStateMade() {
    for (WorkspaceRef ref : own) {
      sandboxes.destroy(ref);
    }
    own.clear();
  }

  @AfterAll
  void destroyAll() throws Exception {
    if (hostSleep != null) {
      hostSleep.destroyForcibly();
    }
    if (sandboxes != null) {
      sandboxes.close(); // its warm pool's members, if any
      for (SnapshotInfo s : sandboxes.snapshots()) {
        sandboxes.removeSnapshot(s.name());
      }
      TestImages.destroyAllAndDelete(sandboxes, home);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(State.class)
  void rootInsideCannotEscapeAndIsConfinedAsInAFreshSandbox(State state) throws Exception {
    for (Target target : enter(state)) {
      String where = state + ", " + target.what() + " (local:" + target.id() + ")";
      assertThat(check(target.ws(), "uname -r"))
          .as("%s: runs on the kernel of its isolation, %s", where, isolation())
          .isEqualTo(kernelRelease());
      assertConfinedAsAtCreate(where, target);
      assertInItsOwnIdBlock(where, target);
      assertHostProcessesAsAtCreate(where, target);
      assertEscapesAreRefused(where, target);
    }
  }

  /**
   * The root cause of the filter lost after a live fork or a wake from hibernate: {@code crun exec}
   * takes the filter from {@code seccomp.bpf} in the container's state directory, not from its
   * config, and {@code crun restore} does not write that file, so every later command ran with
   * {@code Seccomp: 0}, and {@code unshare -Ur} gave a nested root that could mount. Whatever
   * leaves a container's state without the file, no command may run unfiltered.
   */
  @org.junit.jupiter.api.Test
  void noCommandRunsUnfilteredWhenTheRuntimeStateLacksTheFilter() throws Exception {
    Target t = create("a sandbox whose runtime state has no filter file, as crun restore left it");
    Path file = sandboxes.engine().runtime().stateRoot().resolve(t.id()).resolve("seccomp.bpf");
    assertThat(file).as("crun run keeps the compiled filter in its state").exists();
    Files.delete(file);
    CommandResult r;
    try {
      r =
          t.ws()
              .run(
                  Command.shell(
                      "grep '^Seccomp:' /proc/self/status; unshare -Ur sh -c 'mount -t tmpfs"
                          + " none /tmp && echo NESTED-MOUNT-OK'; echo DONE"),
                  RunOptions.withTimeout(TIMEOUT));
    } catch (dev.sandbox4j.workspace.WorkspaceException refused) {
      assertThat(refused.getMessage())
          .as("the command is refused, saying why")
          .contains("seccomp filter");
      return;
    }
    assertThat(r.stdoutText())
        .as("a command that runs at all runs filtered, and no nested root mounts: %s", r)
        .contains("Seccomp:\t2")
        .doesNotContain("NESTED-MOUNT-OK");
  }

  // ---- what differs by isolation: a container's answers, overridden for gVisor ------------

  /** Fails (under {@code CI=true}) or skips the class where its sandboxes cannot run. */
  void requirePrerequisites() {
    Prerequisites.requireLocalEngine();
  }

  /** The isolation of every sandbox this class makes. */
  Isolation isolation() {
    return Isolation.CONTAINER;
  }

  /** The warm pool of the provider that makes the sandboxes attacked (0: none). */
  int warmPool() {
    return 0;
  }

  /** What {@code uname -r} says inside: a container runs on the host's kernel. */
  String kernelRelease() {
    return System.getProperty("os.version");
  }

  /** Runs {@code argv} as root inside, as the sandbox user becomes root: through sudo. */
  CommandResult asRoot(Target target, List<String> argv) {
    List<String> sudo = new ArrayList<>(List.of("sudo"));
    sudo.addAll(argv);
    return target.ws().run(Command.argv(sudo), RunOptions.withTimeout(TIMEOUT));
  }

  /**
   * The host process whose cgroups hold the running command whose argv has {@code marker}: in a
   * container, the command's own process, found in the sandbox's cgroup.
   */
  long hostProcessOf(Target target, String marker, CompletableFuture<?> run)
      throws InterruptedException {
    return awaitProcess(target.id(), marker, run);
  }

  /** What confines a fresh sandbox's command, read inside: crun's seccomp filter (mode 2). */
  void assertFreshCommandConfinement(View command) {
    assertThat(command.status().get("Seccomp"))
        .as("a fresh sandbox's commands are in seccomp filter mode")
        .isEqualTo("2");
  }

  /**
   * A command's user namespace, read inside, maps its ids to a range of host ids (not the host's
   * own), as large as a fresh sandbox's.
   */
  void assertIdsMappedAsAtCreate(String who, View now, View baseline) {
    assertThat(now.uidMap().strip().split("\\s+"))
        .as("%s: ids are mapped to a range of the host, not the host's own ids", who)
        .hasSize(3)
        .satisfies(f -> assertThat(f[0]).isEqualTo("0"))
        .satisfies(f -> assertThat(f[1]).isNotEqualTo("0"))
        .satisfies(f -> assertThat(f[2]).isEqualTo(baseline.uidMap().strip().split("\\s+")[2]));
  }

  /**
   * The confinement of the sandbox's host processes that are not its commands. A container has
   * none: its processes are the host's, and {@link #assertConfinedAsAtCreate} reads each of them.
   */
  void assertHostProcessesAsAtCreate(String where, Target target) throws Exception {}

  /**
   * Whether {@code attack} was refused, as {@code hostile.py} judges it: a system call only by the
   * seccomp profile's EPERM, since any other answer came from the host's kernel, which must never
   * see these calls.
   */
  boolean refused(String attack, Map<String, Object> result) {
    return Boolean.TRUE.equals(result.get("refused"));
  }

  /**
   * Attacks of {@code hostile.py} that the sandbox's own kernel answers without the host's, so
   * their success is no escape, with why: none for a container, whose kernel is the host's.
   */
  Map<String, String> servedInsideItsKernel() {
    return Map.of();
  }

  /**
   * What the nested-namespace shell may print: nothing for a container, whose seccomp profile
   * refuses a new user namespace (the host kernel's, a large attack surface).
   */
  List<String> nestedNamespacesItsKernelServes() {
    return List.of();
  }

  // ---- the states -------------------------------------------------------------------------

  List<Target> enter(State state) throws Exception {
    return switch (state) {
      case CREATE -> List.of(reference);
      case EXEC -> {
        Target t = create("a sandbox that ran commands, one still running in the background");
        busy(t);
        yield List.of(t);
      }
      case LIVE_FORK -> {
        requireCheckpoints();
        Target parent = create("the parent of a live fork");
        busy(parent);
        ForkResult fork = sandboxes.fork(parent.ref());
        own.add(fork.ref());
        assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
        yield List.of(attached("the live fork", fork.ref()), parent);
      }
      case FILES_FORK -> {
        Target parent = create("the parent of a files-only fork");
        busy(parent);
        ForkResult fork = sandboxes.forkFiles(parent.ref());
        own.add(fork.ref());
        yield List.of(attached("the files-only fork", fork.ref()));
      }
      case SNAPSHOT_THEN_CREATE -> {
        Target parent = create("the snapshotted sandbox");
        busy(parent);
        String name = "hostile-" + UUID.randomUUID().toString().substring(0, 8);
        sandboxes.snapshot(parent.ref(), name);
        Workspace ws =
            Workspace.of(
                LocalSandbox.builder()
                    .home(home)
                    .isolation(isolation())
                    .snapshot(name)
                    .egress(policy())
                    .progress(line -> {})
                    .build()
                    .newBackend());
        WorkspaceRef ref = ws.open();
        own.add(ref);
        yield List.of(new Target("a sandbox created from a snapshot", ws, ref, map(ws)));
      }
      case STOP_THEN_START -> {
        Target t = create("a stopped then started sandbox");
        busy(t);
        sandboxes.stop(t.ref());
        sandboxes.start(t.ref());
        yield List.of(t);
      }
      case SUSPEND_THEN_RESUME -> {
        Target t = create("a suspended then resumed sandbox");
        busy(t);
        sandboxes.suspend(t.ref());
        sandboxes.resume(t.ref());
        yield List.of(t);
      }
      case HIBERNATE_THEN_WAKE -> {
        requireCheckpoints();
        Target t = create("a hibernated sandbox woken by a command");
        busy(t);
        sandboxes.hibernate(t.ref());
        assertThat(state(t.ref())).isEqualTo("hibernated");
        check(t.ws(), "true"); // wakes it
        yield List.of(t);
      }
      case SUPERVISOR_RESTART -> {
        Target t = create("a sandbox whose supervisor was killed and restarted");
        busy(t);
        awaitEgressProxy();
        long old = supervisorPid().orElseThrow(() -> new AssertionError("no supervisor runs"));
        ProcessHandle.of(old).ifPresent(ProcessHandle::destroyForcibly);
        awaitGone(old);
        // The next use of the engine restarts it, but not within 5 s of this JVM's last start of
        // one (Supervisor's respawn guard), which an earlier state may have done: use it until
        // then.
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (supervisorPid().filter(p -> p != old).isEmpty() && System.nanoTime() < deadline) {
          sandboxes.list();
          Thread.sleep(250);
        }
        assertThat(supervisorPid()).as("a new supervisor runs").isPresent().get().isNotEqualTo(old);
        yield List.of(t);
      }
      case HOST_REBOOT_THEN_SETUP -> {
        Target running = create("a sandbox running at the reboot");
        busy(running);
        yield afterReboot(List.of(running));
      }
      case HIBERNATED_ACROSS_A_HOST_REBOOT -> {
        requireCheckpoints();
        Target hibernated = create("a sandbox hibernated at the reboot");
        busy(hibernated);
        sandboxes.hibernate(hibernated.ref());
        yield afterReboot(List.of(hibernated));
      }
    };
  }

  /**
   * Simulates a host reboot ({@link #simulateReboot}), then does what follows one: {@code setup}, a
   * fresh engine (a new JVM: no caches), {@code gc}, and a command in each of {@code targets},
   * which starts or restores it.
   */
  private List<Target> afterReboot(List<Target> targets) throws Exception {
    sandboxes.close(); // its JVM goes with the reboot: so do the members of its warm pool
    simulateReboot();
    OciRuntime.forgetCompiledSeccomp();
    sandboxes = provider();
    HostSetup.setup(home, line -> {});
    sandboxes.gc();
    neighbor = Workspace.of(sandboxes.backend(neighborRef).orElseThrow());
    startNeighborServer();
    List<Target> after = new ArrayList<>();
    for (Target t : targets) {
      Workspace ws = Workspace.of(sandboxes.backend(t.ref()).orElseThrow());
      check(ws, "true"); // attaches: starts or restores it
      after.add(new Target(t.what(), ws, t.ref(), t.mapAtCreate()));
    }
    return after;
  }

  /**
   * Runs commands, one of them as root, and leaves one running in the background that a checkpoint
   * carries.
   */
  void busy(Target t) {
    check(t.ws(), "nohup sleep 3600 >/dev/null 2>&1 </dev/null & echo x > /tmp/x");
    CommandResult root = asRoot(t, List.of("true"));
    assertThat(root.exitCode()).as("a command as root: %s", root).isZero();
  }

  // ---- confinement ------------------------------------------------------------------------

  private void assertConfinedAsAtCreate(String where, Target target) throws Exception {
    for (boolean root : List.of(false, true)) {
      View baseline = root ? baselineRoot : baselineUser;
      View now = probe(target, root);
      String who = where + (root ? ", root inside" : ", the sandbox user");
      assertThat(now.status())
          .as(
              "%s: seccomp, no_new_privs and every capability set are those of a fresh sandbox",
              who)
          .isEqualTo(baseline.status());
      assertThat(now.limits())
          .as("%s: the memory, pids and CPU limits it is held to are a fresh sandbox's", who)
          .isEqualTo(baseline.limits());
      String map = mapping(now.uidMap(), now.gidMap());
      assertIdsMappedAsAtCreate(who, now, baseline);
      target
          .mapAtCreate()
          .ifPresent(
              created ->
                  assertThat(map)
                      .as("%s: the user namespace mapping is the one it had at create", who)
                      .isEqualTo(created));
      Map<String, String> ownStatus = baseline.status();
      assertThat(now.processes())
          .as(
              "%s: every process in the sandbox (restored ones too) is filtered, bounded and"
                  + " mapped as a fresh sandbox's",
              who)
          .isNotEmpty()
          .allSatisfy(
              (pid, p) -> {
                // a fresh sandbox's (for a container: filter mode 2, asserted at create)
                assertThat(p.get("Seccomp"))
                    .as("pid %s (%s) Seccomp", pid, p)
                    .isEqualTo(ownStatus.get("Seccomp"));
                assertThat(p.get("CapBnd"))
                    .as("pid %s (%s) CapBnd", pid, p)
                    .isEqualTo(ownStatus.get("CapBnd"));
                assertThat(p.get("NoNewPrivs"))
                    .as("pid %s (%s) NoNewPrivs", pid, p)
                    .isEqualTo(ownStatus.get("NoNewPrivs"));
                assertThat(p.get("uid_map") + "|" + p.get("gid_map"))
                    .as("pid %s (%s) mapping", pid, p)
                    .isEqualTo(map);
              });
    }
  }

  /**
   * The sandbox runs in a block of host ids of its own (issue 13 item 4): its init's uid and gid
   * maps, read on the host, are one extent of 65536 ids outside the canonical block that owns the
   * image layers, disjoint from those of every other running sandbox of the home (the reference,
   * the neighbour, a fork's parent), and a file root writes inside is owned on the host by it.
   */
  private void assertInItsOwnIdBlock(String where, Target target) throws Exception {
    long[] own = hostRange(target.id());
    assertThat(own[1]).as("%s: its user namespace maps 65536 ids", where).isEqualTo(65536);
    assertThat(own[0] >= Image.UID_SHIFT + 65536 || own[0] + own[1] <= Image.UID_SHIFT)
        .as("%s: host ids %d.. are not the canonical block that owns the layers", where, own[0])
        .isTrue();
    for (SandboxRecord other : sandboxes.engine().list()) {
      if (other.id().equals(target.id())
          || !sandboxes
              .engine()
              .runtimeOf(other.id())
              .status(other.id())
              .filter("running"::equals)
              .isPresent()) {
        continue;
      }
      long[] theirs = hostRange(other.id());
      assertThat(own[0] + own[1] <= theirs[0] || theirs[0] + theirs[1] <= own[0])
          .as(
              "%s: host ids %d..+%d are disjoint from local:%s's %d..+%d",
              where, own[0], own[1], other.id(), theirs[0], theirs[1])
          .isTrue();
    }
    String name = "owner-probe-" + UUID.randomUUID();
    CommandResult wrote = asRoot(target, List.of("sh", "-c", "echo x > /var/tmp/" + name));
    assertThat(wrote.exitCode()).as("%s: root writes a file: %s", where, wrote).isZero();
    Path onHost =
        home.resolve("sandboxes").resolve(target.id()).resolve("rootfs/var/tmp").resolve(name);
    assertThat(
            List.of(
                Files.getAttribute(onHost, "unix:uid", java.nio.file.LinkOption.NOFOLLOW_LINKS),
                Files.getAttribute(onHost, "unix:gid", java.nio.file.LinkOption.NOFOLLOW_LINKS)))
        .as("%s: a file root writes inside is owned on the host by its own block", where)
        .containsExactly((int) own[0], (int) own[0]);
  }

  /** {hostID, size} of sandbox {@code id}'s user namespace, read on the host from its init. */
  long[] hostRange(String id) throws IOException {
    long pid =
        OciRuntime.initPid(home.resolve("sandboxes").resolve(id).resolve("bundle"))
            .orElseThrow(() -> new AssertionError("local:" + id + " has no init"));
    String uid = Files.readString(Path.of("/proc", Long.toString(pid), "uid_map")).strip();
    String gid = Files.readString(Path.of("/proc", Long.toString(pid), "gid_map")).strip();
    assertThat(gid).as("local:%s maps gids as uids", id).isEqualTo(uid);
    String[] f = uid.split("\\s+");
    assertThat(f).as(uid).hasSize(3);
    return new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])};
  }

  /**
   * The host processes in sandbox {@code id}'s cgroups: its unified cgroup's ({@link
   * dev.sandbox4j.runtime.internal.linux.Cgroups#pids}) and, on a host that also has v1
   * hierarchies, theirs: {@code runsc} puts the Sentry and gofer only in the v1 cgroups there.
   */
  List<Long> hostPids(String id) {
    Set<Long> pids = new LinkedHashSet<>(sandboxes.engine().cgroups().pids(id));
    for (String procs : sandboxes.engine().cgroups().v1ProcsFiles(id)) {
      try {
        for (String line : Files.readAllLines(Path.of(procs))) {
          if (!line.isBlank()) {
            pids.add(Long.parseLong(line.strip()));
          }
        }
      } catch (IOException e) {
        // removed meanwhile
      }
    }
    return List.copyOf(pids);
  }

  /**
   * Runs the probe in the sandbox and, while it waits, reads the cgroup limits of its process on
   * the host.
   */
  private View probe(Target target, boolean root) throws Exception {
    String marker = "probe-" + UUID.randomUUID();
    String go = "/tmp/" + marker + ".go";
    List<String> argv = List.of("python3", "-c", probe, marker, go);
    CompletableFuture<CommandResult> run =
        CompletableFuture.supplyAsync(
            () ->
                root
                    ? asRoot(target, argv)
                    : target.ws().run(Command.argv(argv), RunOptions.withTimeout(TIMEOUT)),
            THREADS);
    Map<String, Long> limits;
    try {
      long pid = hostProcessOf(target, marker, run);
      limits = hostLimits(pid);
    } finally {
      target.ws().run(Command.argv("touch", go), RunOptions.withTimeout(TIMEOUT));
    }
    CommandResult r = run.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    assertThat(r.exitCode()).as("the probe: %s", r).isZero();
    JsonNode out = JSON.readTree(r.stdoutText());
    Map<String, Map<String, String>> processes =
        JSON.convertValue(out.get("processes"), new TypeReference<>() {});
    return new View(
        JSON.convertValue(out.get("self"), new TypeReference<Map<String, String>>() {}),
        out.get("uid_map").asText(),
        out.get("gid_map").asText(),
        limits,
        processes);
  }

  /** The host pid of the sandbox's process whose command line has {@code marker}. */
  private long awaitProcess(String id, String marker, CompletableFuture<?> run)
      throws InterruptedException {
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (System.nanoTime() < deadline && !run.isDone()) {
      for (long pid : sandboxes.engine().cgroups().pids(id)) {
        List<String> args = cmdline(pid);
        if (args.contains(marker) && !args.isEmpty() && args.getFirst().endsWith("python3")) {
          return pid;
        }
      }
      Thread.sleep(5);
    }
    throw new AssertionError(
        "the probe never showed up in the sandbox's cgroup: " + (run.isDone() ? run.join() : ""));
  }

  /**
   * The limits process {@code pid} is held to, from its cgroups on the host: for each controller,
   * the tightest limit of its cgroup and every ancestor. Unlimited is {@link Long#MAX_VALUE}.
   */
  static Map<String, Long> hostLimits(long pid) throws IOException {
    Map<String, Path> mounts = cgroupMounts();
    Map<String, Long> limits = new TreeMap<>();
    for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/cgroup"))) {
      String[] f = line.split(":", 3);
      String relative = f[2].substring(1);
      for (String controller : f[1].isEmpty() ? List.of("") : List.of(f[1].split(","))) {
        Path mount = mounts.get(controller);
        if (mount == null) {
          continue;
        }
        Path dir = relative.isEmpty() ? mount : mount.resolve(relative);
        switch (controller) {
          case "memory" ->
              limits.merge("memory", tightest(dir, mount, "memory.limit_in_bytes"), Math::min);
          case "pids" -> limits.merge("pids", tightest(dir, mount, "pids.max"), Math::min);
          case "cpu" -> limits.merge("cpu", tightestCpuV1(dir, mount), Math::min);
          case "" -> {
            limits.merge("memory", tightest(dir, mount, "memory.max"), Math::min);
            limits.merge("pids", tightest(dir, mount, "pids.max"), Math::min);
            limits.merge("cpu", tightestCpuV2(dir, mount), Math::min);
          }
          default -> {}
        }
      }
    }
    return limits;
  }

  private static long tightest(Path dir, Path mount, String file) throws IOException {
    long min = Long.MAX_VALUE;
    for (Path d = dir; d != null && d.startsWith(mount); d = d.getParent()) {
      Path p = d.resolve(file);
      if (Files.exists(p)) {
        String v = Files.readString(p).strip();
        if (!v.equals("max") && !v.isEmpty()) {
          long n = Long.parseLong(v);
          // cgroup v1 says "unlimited" with a huge page-rounded number
          min = Math.min(min, n >= (1L << 62) ? Long.MAX_VALUE : n);
        }
      }
    }
    return min;
  }

  /** CPUs as millionths: quota / period. */
  private static long tightestCpuV1(Path dir, Path mount) throws IOException {
    long min = Long.MAX_VALUE;
    for (Path d = dir; d != null && d.startsWith(mount); d = d.getParent()) {
      Path quota = d.resolve("cpu.cfs_quota_us");
      if (Files.exists(quota)) {
        long q = Long.parseLong(Files.readString(quota).strip());
        long period = Long.parseLong(Files.readString(d.resolve("cpu.cfs_period_us")).strip());
        if (q > 0) {
          min = Math.min(min, q * 1_000_000 / period);
        }
      }
    }
    return min;
  }

  private static long tightestCpuV2(Path dir, Path mount) throws IOException {
    long min = Long.MAX_VALUE;
    for (Path d = dir; d != null && d.startsWith(mount); d = d.getParent()) {
      Path max = d.resolve("cpu.max");
      if (Files.exists(max)) {
        String[] f = Files.readString(max).strip().split(" ");
        if (!f[0].equals("max")) {
          min = Math.min(min, Long.parseLong(f[0]) * 1_000_000 / Long.parseLong(f[1]));
        }
      }
    }
    return min;
  }

  /** Controller name (or "" for cgroup v2) to the host's mount point of its hierarchy. */
  private static Map<String, Path> cgroupMounts() throws IOException {
    Map<String, Path> mounts = new LinkedHashMap<>();
    for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
      String[] halves = line.split(" - ", 2);
      String[] after = halves[1].split(" ");
      Path at = Path.of(halves[0].split(" ")[4]);
      if (!at.startsWith("/sys/fs/cgroup")) {
        continue;
      }
      if (after[0].equals("cgroup2")) {
        mounts.putIfAbsent("", at);
      } else if (after[0].equals("cgroup")) {
        for (String option : after[2].split(",")) {
          mounts.putIfAbsent(option, at);
        }
      }
    }
    return mounts;
  }

  // ---- escapes ----------------------------------------------------------------------------

  private void assertEscapesAreRefused(String where, Target target) throws Exception {
    awaitEgressProxy();
    String gateway = sandboxes.engine().networks().gateway();
    String neighborAddress = addressOf(neighbor);
    try (ServerSocket loopback = new ServerSocket();
        ServerSocket wildcard = new ServerSocket()) {
      loopback.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
      wildcard.bind(new InetSocketAddress(0));
      AtomicInteger accepted = new AtomicInteger();
      CompletableFuture<Void> a = IsolationTest.acceptAll(loopback, accepted);
      CompletableFuture<Void> b = IsolationTest.acceptAll(wildcard, accepted);

      List<List<Object>> targets = new ArrayList<>();
      int portProxy = PortUrls.port(home);
      targets.add(List.of("the port proxy on the host's loopback", "127.0.0.1", portProxy));
      targets.add(List.of("the port proxy on the gateway", gateway, portProxy));
      targets.add(List.of("another sandbox's server", neighborAddress, NEIGHBOR_PORT));
      for (int port : hostListeningPorts()) {
        if (port != Networks.PROXY_PORT) {
          targets.add(List.of("the gateway's port " + port, gateway, port));
        }
        targets.add(List.of("the host's loopback port " + port, "127.0.0.1", port));
      }
      for (String address : hostAddresses()) {
        targets.add(
            List.of(
                "the host's " + address + " port " + wildcard.getLocalPort(),
                address,
                wildcard.getLocalPort()));
      }
      targets.add(List.of("the egress proxy (allowed)", gateway, Networks.PROXY_PORT));

      Map<String, Object> args = new LinkedHashMap<>();
      String[] device = hostRootDevice().split(":");
      args.put("device", List.of(Integer.parseInt(device[0]), Integer.parseInt(device[1])));
      List<Long> hostPids = new ArrayList<>();
      hostPids.add(ProcessHandle.current().pid());
      hostPids.add(hostSleep.pid());
      supervisorPid().ifPresent(hostPids::add);
      args.put("hostPids", hostPids);
      args.put("hostPaths", List.of(secretFile.toString(), home.resolve("secret.txt").toString()));
      args.put("secret", secret);
      args.put("targets", targets);
      args.put("mnt", "/tmp/hostile-" + UUID.randomUUID());

      CommandResult r =
          asRoot(target, List.of("python3", "-c", hostile, JSON.writeValueAsString(args)));
      assertThat(r.exitCode()).as("%s: the attack script ran: %s", where, r).isZero();
      Map<String, Map<String, Object>> results =
          JSON.readValue(r.stdoutText(), new TypeReference<>() {});
      Map<String, Map<String, Object>> control =
          Map.of(
              "connect the egress proxy (allowed)",
              results.remove("connect the egress proxy (allowed)"));
      assertThat(results)
          .as("%s: the attack script made every attempt", where)
          .hasSizeGreaterThan(30);
      assertThat(results.keySet())
          .as("%s: the attacks its kernel serves are attacks of the script", where)
          .containsAll(servedInsideItsKernel().keySet());
      Map<String, Map<String, Object>> escapes = new TreeMap<>(results);
      escapes.keySet().removeAll(servedInsideItsKernel().keySet());
      assertThat(escapes)
          .as("%s: every escape attempt of root inside is refused", where)
          .allSatisfy(
              (attack, result) ->
                  assertThat(refused(attack, result))
                      .as("%s: %s (%s)", where, attack, result.get("detail"))
                      .isTrue());
      assertThat(control.values().iterator().next().get("refused"))
          .as(
              "%s: control: the egress proxy on the gateway is reachable, so the refusals above"
                  + " are the rules, not a dead network",
              where)
          .isEqualTo(false);
      String processes = String.valueOf(results.get("host processes invisible").get("detail"));
      assertThat(processes)
          .as("%s: no host process is visible inside (JVM, host sleep, supervisor)", where)
          .doesNotContain("java")
          .doesNotContain("sleep 7777")
          .doesNotContain("Supervisor");
      assertThat(JSON.readTree(processes).size())
          .as("%s: /proc inside lists only the sandbox's few processes", where)
          .isLessThan(16);
      loopback.close();
      wildcard.close();
      a.get(5, TimeUnit.SECONDS);
      b.get(5, TimeUnit.SECONDS);
      assertThat(accepted.get())
          .as("%s: the host's servers saw no connection from the sandbox", where)
          .isZero();
    }

    String nestedAsUser =
        "unshare -Ur sh -c 'mount -t tmpfs none /tmp && echo NESTED-MOUNT-OK';"
            + " unshare -Urm sh -c 'mount -t tmpfs none /tmp && echo NESTED-OWN-MOUNT-OK';"
            + " unshare -Ur true && echo NESTED-USERNS-OK; echo DONE";
    String nestedAsRoot =
        "unshare -Ur sh -c 'mount -t tmpfs none /tmp && echo NESTED-MOUNT-OK'; unshare -m sh -c"
            + " 'mount -t proc proc /proc && echo NESTED-MOUNT-OK'; echo DONE";
    for (CommandResult nested :
        List.of(
            target.ws().run(Command.shell(nestedAsUser), RunOptions.withTimeout(TIMEOUT)),
            asRoot(target, List.of("sh", "-c", nestedAsRoot)))) {
      String said = nested.stdoutText();
      for (String allowed : nestedNamespacesItsKernelServes()) {
        said = said.replace(allowed, "");
      }
      assertThat(said)
          .as(
              "%s: no nested user or mount namespace can be made (%s aside), so no nested root"
                  + " mounts anything: %s",
              where, nestedNamespacesItsKernelServes(), nested)
          .contains("DONE")
          .doesNotContain("NESTED-");
    }

    String reached =
        check(
            neighbor,
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", "
                + NEIGHBOR_PORT
                + "), 3); print(\"up\")'");
    assertThat(reached)
        .as("control: the other sandbox's server is up, so its refusal above is the rules")
        .isEqualTo("up");
  }

  // ---- the reboot -------------------------------------------------------------------------

  /**
   * What a host reboot does to this home: every process gone (sandboxes and supervisor), and with
   * them the overlay mounts and the sandboxes' disk mounts, the cgroups, the runtime's state (a
   * tmpfs on most hosts), the nftables table, the network namespace names, the gateway address and
   * the subnet claim under {@code /run}. The files in the home stay. A gVisor sandbox's host
   * processes are its Sentry and gofer (killed with the cgroups' processes), and {@code runsc}
   * keeps its state apart from crun's: both state roots go.
   */
  private void simulateReboot() throws Exception {
    Engine engine = sandboxes.engine();
    supervisorPid()
        .ifPresent(
            pid -> {
              ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
              awaitGone(pid);
            });
    for (String id : engine.cgroups().sandboxIds()) {
      Freezer.thaw(engine.cgroups(), id);
      long deadline = System.nanoTime() + TIMEOUT.toNanos();
      while (!hostPids(id).isEmpty() && System.nanoTime() < deadline) {
        for (long pid : hostPids(id)) {
          ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
        }
        Thread.sleep(5);
      }
      assertThat(hostPids(id)).as("killed by the reboot").isEmpty();
      engine.cgroups().removeSandbox(id);
    }
    List<Path> stateRoots = new ArrayList<>(List.of(engine.runtime().stateRoot()));
    if (dev.sandbox4j.runtime.internal.oci.Gvisor.unavailable().isEmpty()) {
      stateRoots.add(engine.runtime(Isolation.GVISOR).stateRoot());
    }
    try (Stream<ProcessHandle> all = ProcessHandle.allProcesses()) {
      List<ProcessHandle> runtimes = // a runsc (exec, or a Sentry outside the cgroups) of the home
          all.filter(
                  p ->
                      cmdline(p.pid()).stream()
                          .anyMatch(
                              a -> stateRoots.stream().anyMatch(r -> a.endsWith(r.toString()))))
              .toList();
      runtimes.forEach(ProcessHandle::destroyForcibly);
      runtimes.forEach(p -> awaitGone(p.pid()));
    }
    try (Stream<Path> dirs = Files.list(home.resolve("sandboxes"))) {
      for (Path dir : dirs.toList()) {
        Overlay.unmount(dir.resolve("rootfs"));
        SandboxDisk.unmount(dir); // its disk's loop mount too; the image file stays
      }
    }
    for (Path root : stateRoots) {
      Trees.delete(root);
    }
    Networks net = engine.networks();
    TestImages.run(List.of("sh", "-c", "nft delete table inet " + net.table() + " || true"));
    try (Stream<Path> names = Files.list(Path.of("/run/netns"))) {
      for (Path name : names.toList()) {
        if (name.getFileName().toString().startsWith(net.netnsName(""))) {
          TestImages.run(List.of("ip", "netns", "delete", name.getFileName().toString()));
        }
      }
    }
    TestImages.run(
        List.of("sh", "-c", "ip addr del " + net.gateway() + "/32 dev lo 2>/dev/null || true"));
    Files.deleteIfExists(Path.of("/run/sandbox4j/subnets/10." + net.subnet()));
  }

  // ---- helpers ----------------------------------------------------------------------------

  private LocalSandbox provider() {
    return LocalSandbox.builder()
        .home(home)
        .isolation(isolation())
        .memory(MEMORY)
        .pids(PIDS)
        .egress(policy())
        .warmPool(warmPool())
        .progress(line -> {})
        .build();
  }

  /** A policy that uses the egress proxy, so that its port on the gateway is open: the control. */
  private static EgressPolicy policy() {
    return EgressPolicy.allow("example.com");
  }

  private void requireCheckpoints() {
    Optional<String> why = Checkpoints.unavailable(sandboxes.engine().runtime());
    Prerequisites.require(why.isEmpty(), "checkpoint/restore (CRIU): " + why.orElse(""));
  }

  Target create(String what) {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref;
    try {
      ref = ws.open();
    } finally {
      ws.ref().ifPresent(own::add);
    }
    if (reference == null) {
      own.remove(ref); // the reference lives for the whole class
    }
    return new Target(what, ws, ref, map(ws));
  }

  private Target attached(String what, WorkspaceRef ref) {
    Workspace ws = Workspace.of(sandboxes.backend(ref).orElseThrow());
    return new Target(what, ws, ref, Optional.empty());
  }

  /** The uid_map and gid_map of a command, right now, as {@link #mapping} writes them. */
  private static Optional<String> map(Workspace ws) {
    String uid = check(ws, "cat /proc/self/uid_map");
    String gid = check(ws, "cat /proc/self/gid_map");
    return Optional.of(mapping(uid, gid));
  }

  private static String mapping(String uidMap, String gidMap) {
    return String.join(" ", uidMap.strip().split("\\s+"))
        + "|"
        + String.join(" ", gidMap.strip().split("\\s+"));
  }

  private void startNeighborServer() {
    check(
        neighbor,
        "nohup python3 -m http.server "
            + NEIGHBOR_PORT
            + " --bind 0.0.0.0 --directory /tmp >/dev/null 2>&1 </dev/null &"
            + " for i in $(seq 100); do python3 -c 'import socket;"
            + " socket.create_connection((\"127.0.0.1\", "
            + NEIGHBOR_PORT
            + "), 1)' 2>/dev/null && exit 0; sleep 0.1; done; exit 1");
  }

  private static String addressOf(Workspace ws) {
    return check(ws, "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1");
  }

  String state(WorkspaceRef ref) {
    return sandboxes.info(ref).orElseThrow().state();
  }

  /** Waits until the supervisor's egress proxy listens on the gateway (it binds it on a scan). */
  private void awaitEgressProxy() throws Exception {
    String gateway = sandboxes.engine().networks().gateway();
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (System.nanoTime() < deadline) {
      try (Socket s = new Socket()) {
        s.connect(new InetSocketAddress(gateway, Networks.PROXY_PORT), 1000);
        return;
      } catch (IOException notYet) {
        sandboxes.list(); // starts the supervisor if it is not running
        Thread.sleep(50);
      }
    }
    throw new AssertionError("the egress proxy never listened on " + gateway);
  }

  private Optional<Long> supervisorPid() {
    try (Stream<ProcessHandle> all = ProcessHandle.allProcesses()) {
      return all.filter(
              p -> {
                List<String> args = cmdline(p.pid());
                return args.contains(Supervisor.class.getName()) && args.contains(home.toString());
              })
          .map(ProcessHandle::pid)
          .findFirst();
    }
  }

  private static void awaitGone(long pid) {
    ProcessHandle.of(pid)
        .ifPresent(
            p -> {
              try {
                p.onExit().get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
              } catch (Exception e) {
                throw new AssertionError("process " + pid + " did not end", e);
              }
            });
  }

  static List<String> cmdline(long pid) {
    try {
      byte[] raw = Files.readAllBytes(Path.of("/proc/" + pid + "/cmdline"));
      if (raw.length == 0) {
        return List.of();
      }
      return List.of(new String(raw, StandardCharsets.UTF_8).split("\0"));
    } catch (IOException e) {
      return List.of();
    }
  }

  static String check(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(TIMEOUT));
    assertThat(r.exitCode()).as("%s: %s", script, r).isZero();
    return r.stdoutText().strip();
  }

  private static String resource(String name) throws IOException {
    try (InputStream in = HostileSandboxTest.class.getResourceAsStream(name)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /** The TCP ports something on the host listens on (IPv4 and IPv6), at most 64. */
  private static Set<Integer> hostListeningPorts() throws IOException {
    Set<Integer> ports = new LinkedHashSet<>();
    for (String file : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
      for (String line : Files.readAllLines(Path.of(file))) {
        String[] f = line.strip().split("\\s+");
        if (f.length > 3 && f[3].equals("0A")) {
          String local = f[1];
          ports.add(Integer.parseInt(local.substring(local.lastIndexOf(':') + 1), 16));
        }
      }
    }
    return ports.stream()
        .limit(64)
        .collect(java.util.stream.Collectors.toCollection(LinkedHashSet::new));
  }

  /** The host's non-loopback IPv4 addresses, the gateway's excluded (it is on lo). */
  private static List<String> hostAddresses() throws IOException {
    List<String> out = new ArrayList<>();
    for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces())) {
      if (!nic.isUp() || nic.isLoopback() || nic.getName().startsWith("s4")) {
        continue;
      }
      for (InetAddress address : Collections.list(nic.getInetAddresses())) {
        if (address instanceof Inet4Address) {
          out.add(address.getHostAddress());
        }
      }
    }
    return out;
  }

  /** "major:minor" of the block device holding the host's root file system. */
  private static String hostRootDevice() throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
      String[] f = line.split(" ");
      if (f[4].equals("/")) {
        return f[2];
      }
    }
    return "254:0";
  }
}
