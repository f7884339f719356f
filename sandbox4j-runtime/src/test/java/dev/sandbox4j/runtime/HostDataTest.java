package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.engine.StateDirectory;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.RootfsOwnership;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 13, item 4: sandbox data on the host belongs to root alone. Attacks as an unprivileged host
 * user ({@code nobody}, through {@code setpriv}) against a private home with running and hibernated
 * sandboxes: a setuid binary planted from inside runs without privileges through the host path (and
 * cannot even be reached), and no file of the home (records, bundles, checkpoint memory images,
 * logs, secrets, sandboxes' files) can be read or written.
 */
class HostDataTest {
  private static final int NOBODY = 65534;

  @TempDir static Path temp;
  private static Path home;
  private static LocalSandbox sandboxes;

  @BeforeAll
  static void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(Files.isExecutable(Path.of("/usr/bin/setpriv")), "setpriv (util-linux)");
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    sandboxes = LocalSandbox.builder().home(home).progress(line -> {}).build();
  }

  @AfterAll
  static void tearDown() throws IOException {
    if (sandboxes != null) {
      for (SandboxInfo s : sandboxes.list()) {
        sandboxes.destroy(s.ref());
      }
    }
    for (ProcessHandle p : supervisors()) {
      p.destroyForcibly(); // started for this home: ours
      p.onExit().join();
    }
    if (home != null) {
      Trees.delete(home);
    }
  }

  @Test
  void aSetuidBinaryPlantedInsideGivesAHostUserNoPrivilege() throws Exception {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    // From inside: a shell that keeps its privileges (bash -p), setuid to the sandbox's root.
    ws.writeBytes("/tmp/sh", Files.readAllBytes(Path.of("/bin/bash")));
    Exec.checkAsRoot(
        sandboxes.engine(),
        ref.id(),
        List.of(
            "/bin/sh",
            "-c",
            "cp /tmp/sh /usr/local/bin/rootsh && chown 0:0 /usr/local/bin/rootsh"
                + " && chmod 4755 /usr/local/bin/rootsh"));
    Path dir = home.resolve("sandboxes").resolve(ref.id());
    Path planted = dir.resolve("rootfs/usr/local/bin/rootsh");
    int owner = (Integer) Files.getAttribute(planted, "unix:uid", LinkOption.NOFOLLOW_LINKS);
    assertThat(owner).as("the planted file's owner on the host").isGreaterThanOrEqualTo(100_000);
    assertThat((Integer) Files.getAttribute(planted, "unix:mode") & 04000)
        .as("the planted file is setuid")
        .isNotZero();

    // A host user cannot reach it at all.
    CommandResult reach = asNobody(List.of(), planted.toString(), "-p", "-c", "id -u");
    assertThat(reach.exitCode())
        .as("nobody runs %s: %s", planted, reach.stdoutText() + reach.stderrText())
        .isNotZero();
    assertThat(reach.stderrText()).contains("Permission denied");

    // A host user who could reach it (one in the sandbox's root group, which may traverse the
    // sandbox's directory) gains nothing: the host-side mount is nosuid.
    int group = (Integer) Files.getAttribute(dir, "unix:gid", LinkOption.NOFOLLOW_LINKS);
    CommandResult run = asNobody(List.of(group), planted.toString(), "-p", "-c", "id -u");
    assertThat(run.stdoutText().strip())
        .as("the effective uid of the planted binary run from the host: " + run)
        .isEqualTo(Integer.toString(NOBODY));

    String mount =
        Files.readAllLines(Path.of("/proc/self/mountinfo")).stream()
            .filter(l -> l.split(" ")[4].equals(dir.resolve("rootfs").toString()))
            .findFirst()
            .orElseThrow();
    assertThat(mount.split(" ")[5].split(",")).as(mount).contains("nosuid", "nodev");

    // Inside, setuid still works: the sandbox's own root (and its sudo) are its business.
    CommandResult inside =
        ws.run(Command.shell("/usr/local/bin/rootsh -p -c 'id -u'; sudo -n id -u"));
    assertThat(inside.stdoutText()).as(inside.toString()).isEqualTo("0\n0\n");
  }

  @Test
  void noFileOfTheHomeIsReadableOrWritableByAnotherHostUser() throws Exception {
    Workspace running =
        Workspace.of(
            LocalSandbox.builder()
                .home(home)
                .env("S4J_TEST_SECRET", "hunter2")
                .egress(
                    EgressPolicy.allow("example.com")
                        .withHeader("example.com", "Authorization", "Bearer hunter2"))
                .progress(line -> {})
                .build()
                .newBackend());
    running.open();
    running.run(Command.shell("echo data > /home/sandbox/file; sleep 600 >/dev/null 2>&1 &"));
    Workspace stopped = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = stopped.open();
    stopped.run(Command.shell("echo data > /home/sandbox/file"));
    sandboxes.stop(ref);

    // the header secret is on disk (the egress proxy reads it), root's alone
    List<String> holding = new ArrayList<>();
    try (Stream<Path> all = Files.walk(home.resolve("sandboxes"))) {
      for (Path p : all.filter(Files::isRegularFile).toList()) {
        if (!p.toString().contains("/rootfs/")
            && Files.size(p) < 1 << 20
            && Files.readString(p, StandardCharsets.ISO_8859_1).contains("Bearer hunter2")) {
          holding.add(p.toString());
          assertThat(mode(p)).as(p.toString()).isEqualTo("rw-------");
        }
      }
    }
    assertThat(holding).as("files holding the header secret").isNotEmpty();

    List<String> exposed = exposedToNobody(home);
    assertThat(exposed).as("paths under the home another host user can read or write").isEmpty();
  }

  /**
   * No two sandboxes' ids own anything of each other's, in any state (issue 13 item 4): the host
   * ranges their user namespaces map to (read on the host, from each container's init) are
   * disjoint, none is the canonical block that owns the image layers, and a file root writes inside
   * lands on the host owned by the sandbox's own block. Checked after create, a files-only fork, a
   * live fork (child and parent), a snapshot and a sandbox made from it, stop and start, hibernate
   * and wake, and an engine restart (a new provider, as a new JVM). On main every sandbox mapped
   * 0..65535 to host 100000..165535.
   */
  @Test
  void twoSandboxesShareNoHostIds() throws Exception {
    List<WorkspaceRef> live = new ArrayList<>();
    Workspace a = Workspace.of(sandboxes.newBackend());
    live.add(a.open());
    Workspace b = Workspace.of(sandboxes.newBackend());
    live.add(b.open());
    a.run(Command.shell("nohup sleep 600 >/dev/null 2>&1 </dev/null &"));
    assertOwnBlocks("after create", live);

    live.add(sandboxes.forkFiles(live.get(0)).ref());
    assertOwnBlocks("after a files-only fork", live);

    boolean checkpoints = Checkpoints.unavailable(sandboxes.engine().runtime()).isEmpty();
    if (checkpoints || System.getenv("CI") != null) {
      ForkResult fork = sandboxes.fork(live.get(0));
      live.add(fork.ref());
      assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
      assertOwnBlocks("after a live fork (its child and its parent)", live);
    }

    String snapshot = "ids-" + java.util.UUID.randomUUID().toString().substring(0, 8);
    sandboxes.snapshot(live.get(0), snapshot);
    try {
      Path layer = sandboxes.engine().images().find(snapshot).orElseThrow().layers().getLast();
      assertThat(Files.getAttribute(layer.resolve("etc"), "unix:uid", LinkOption.NOFOLLOW_LINKS))
          .as("a snapshot's layer is owned by the canonical ids, like every layer of the store")
          .isEqualTo(Image.UID_SHIFT);
      Workspace fromSnapshot =
          Workspace.of(
              LocalSandbox.builder()
                  .home(home)
                  .snapshot(snapshot)
                  .progress(line -> {})
                  .build()
                  .newBackend());
      live.add(fromSnapshot.open());
      assertOwnBlocks("after a snapshot and a create from it", live);
    } finally {
      for (WorkspaceRef r : live.subList(live.size() - 1, live.size())) {
        sandboxes.destroy(r);
      }
      live.removeLast();
      sandboxes.removeSnapshot(snapshot);
    }

    Map<String, Long> before = blocks(live);
    sandboxes.stop(live.get(1));
    sandboxes.start(live.get(1));
    if (checkpoints || System.getenv("CI") != null) {
      sandboxes.hibernate(live.get(0));
      Workspace.of(sandboxes.backend(live.get(0)).orElseThrow()).run(Command.shell("true"));
    }
    assertOwnBlocks("after stop and start, hibernate and wake", live);
    assertThat(blocks(live)).as("each sandbox keeps its block through them").isEqualTo(before);

    LocalSandbox restarted = LocalSandbox.builder().home(home).progress(line -> {}).build();
    for (WorkspaceRef r : live) {
      Workspace.of(restarted.backend(r).orElseThrow()).run(Command.shell("true"));
    }
    assertOwnBlocks("after an engine restart", live);
    assertThat(blocks(live)).as("each sandbox keeps its block across a restart").isEqualTo(before);
    for (WorkspaceRef r : live) {
      sandboxes.destroy(r);
    }
  }

  /**
   * A file that root in sandbox A makes setuid root, or merely owns, is owned on the host by A's
   * block, and the host id of another sandbox's root cannot write it even where it can reach it
   * (given A's group, which traverses A's directory). On main both roots were host uid 100000.
   */
  @Test
  void oneSandboxRootsFilesAreNotAnotherSandboxRoots() throws Exception {
    Workspace a = Workspace.of(sandboxes.newBackend());
    WorkspaceRef refA = a.open();
    Workspace b = Workspace.of(sandboxes.newBackend());
    WorkspaceRef refB = b.open();
    Exec.checkAsRoot(
        sandboxes.engine(),
        refA.id(),
        List.of(
            "/bin/sh",
            "-c",
            "cp /bin/bash /usr/local/bin/rootsh && chown 0:0 /usr/local/bin/rootsh"
                + " && chmod 4755 /usr/local/bin/rootsh && echo root > /etc/owned-by-root"));
    int baseA = (int) hostRange(hostUidMap(refA))[0];
    int baseB = (int) hostRange(hostUidMap(refB))[0];
    Path dirA = home.resolve("sandboxes").resolve(refA.id());
    int groupA = (Integer) Files.getAttribute(dirA, "unix:gid", LinkOption.NOFOLLOW_LINKS);
    CommandResult write =
        asUserWith(
            baseB,
            List.of(groupA),
            null,
            "/bin/sh",
            "-c",
            "for f in \"$@\"; do echo x >> \"$f\" && echo WROTE \"$f\"; done",
            "sh",
            dirA.resolve("rootfs/usr/local/bin/rootsh").toString(),
            dirA.resolve("rootfs/etc/owned-by-root").toString());
    assertThat(write.stdoutText())
        .as("B's root's host id writes nothing of A's root's: %s", write)
        .doesNotContain("WROTE");
    assertThat(write.stderrText()).contains("Permission denied");
    for (String file : List.of("usr/local/bin/rootsh", "etc/owned-by-root")) {
      Path onHost = dirA.resolve("rootfs").resolve(file);
      assertThat(Files.getAttribute(onHost, "unix:uid", LinkOption.NOFOLLOW_LINKS))
          .as("/%s, root's in A, is owned on the host by A's block", file)
          .isEqualTo(baseA);
      assertThat(Files.getAttribute(SandboxDisk.upper(dirA).resolve(file), "unix:uid"))
          .as("/%s in A's writable layer", file)
          .isEqualTo(baseA);
    }
    assertThat(baseB).as("B's root is another host id than A's").isNotEqualTo(baseA);
  }

  /**
   * A sandbox made before blocks existed (its record has no {@code idBase}, its writable layer is
   * owned by the canonical ids) keeps running in the canonical block after a restart, with its
   * files as they were.
   */
  @Test
  void aSandboxMadeBeforeBlocksKeepsTheCanonicalBlock() throws Exception {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    ws.run(Command.shell("echo kept > /home/sandbox/old-file"));
    Path dir = home.resolve("sandboxes").resolve(ref.id());
    SandboxRecord record = sandboxes.engine().record(ref.id());
    sandboxes.stop(ref);
    // As the code before this change left it: no block in the record, canonical owners.
    com.fasterxml.jackson.databind.node.ObjectNode json =
        (com.fasterxml.jackson.databind.node.ObjectNode)
            new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(Files.readAllBytes(dir.resolve("state.json")));
    json.remove("idBase");
    Files.write(dir.resolve("state.json"), json.toString().getBytes(StandardCharsets.UTF_8));
    SandboxDisk.ensureMounted(dir);
    RootfsOwnership.shiftBlock(SandboxDisk.upper(dir), record.hostBase(), Image.UID_SHIFT);
    Files.setAttribute(dir, "unix:gid", Image.UID_SHIFT, LinkOption.NOFOLLOW_LINKS);
    IdBlocks.free(home, ref.id(), record.idBase());

    LocalSandbox restarted = LocalSandbox.builder().home(home).progress(line -> {}).build();
    Workspace again = Workspace.of(restarted.backend(ref).orElseThrow());
    CommandResult r =
        again.run(
            Command.shell(
                "cat /home/sandbox/old-file; id -u; sudo -n id -u; touch /home/sandbox/new"));
    assertThat(r.stdoutText()).as(r.toString()).isEqualTo("kept\n1000\n0\n");
    assertThat(hostRange(hostUidMap(ref))).containsExactly(Image.UID_SHIFT, 65536L);
    assertThat(
            Files.getAttribute(
                dir.resolve("rootfs/home/sandbox/new"), "unix:uid", LinkOption.NOFOLLOW_LINKS))
        .isEqualTo(Image.UID_SHIFT + 1000);
    restarted.destroy(ref);
  }

  /** Each sandbox's block (the host id of its root), from the live namespaces. */
  private static Map<String, Long> blocks(List<WorkspaceRef> refs) throws IOException {
    Map<String, Long> blocks = new java.util.TreeMap<>();
    for (WorkspaceRef r : refs) {
      blocks.put(r.id(), hostRange(hostUidMap(r))[0]);
    }
    return blocks;
  }

  /**
   * Every sandbox of {@code refs} runs (read on the host) in a block of host ids of its own: its
   * uid and gid maps, of its init and of a command, are one extent of 65536 ids, disjoint from
   * every other's and from the canonical block; a file root makes inside lands owned by that block.
   */
  private static void assertOwnBlocks(String when, List<WorkspaceRef> refs) throws Exception {
    Map<String, long[]> ranges = new java.util.TreeMap<>();
    for (WorkspaceRef r : refs) {
      Workspace ws = Workspace.of(sandboxes.backend(r).orElseThrow());
      String inside =
          ws.run(Command.shell("cat /proc/self/uid_map /proc/self/gid_map")).stdoutText();
      long[] range = hostRange(hostUidMap(r));
      assertThat(inside.lines().map(l -> l.strip().replaceAll("\\s+", " ")).toList())
          .as("%s: local:%s's commands map as its init does, uids and gids alike", when, r.id())
          .containsExactly("0 " + range[0] + " 65536", "0 " + range[0] + " 65536");
      assertThat(range[0] + range[1] <= Image.UID_SHIFT || range[0] >= Image.UID_SHIFT + 65536)
          .as("%s: local:%s is not in the canonical block that owns the layers", when, r.id())
          .isTrue();
      String name = "owner-probe-" + java.util.UUID.randomUUID();
      Exec.checkAsRoot(
          sandboxes.engine(), r.id(), List.of("/bin/sh", "-c", "echo x > /var/tmp/" + name));
      Path onHost =
          home.resolve("sandboxes").resolve(r.id()).resolve("rootfs/var/tmp").resolve(name);
      assertThat(
              List.of(
                  Files.getAttribute(onHost, "unix:uid", LinkOption.NOFOLLOW_LINKS),
                  Files.getAttribute(onHost, "unix:gid", LinkOption.NOFOLLOW_LINKS)))
          .as("%s: a file root writes in local:%s is owned on the host by its block", when, r.id())
          .containsExactly((int) range[0], (int) range[0]);
      ranges.put(r.id(), range);
    }
    for (var x : ranges.entrySet()) {
      for (var y : ranges.entrySet()) {
        if (!x.getKey().equals(y.getKey())) {
          long[] rx = x.getValue();
          long[] ry = y.getValue();
          assertThat(rx[0] + rx[1] <= ry[0] || ry[0] + ry[1] <= rx[0])
              .as(
                  "%s: host ids %d..+%d of local:%s and %d..+%d of local:%s are disjoint",
                  when, rx[0], rx[1], x.getKey(), ry[0], ry[1], y.getKey())
              .isTrue();
        }
      }
    }
  }

  /** The uid_map of sandbox {@code ref}'s container init, read on the host. */
  private static String hostUidMap(WorkspaceRef ref) throws IOException {
    long pid =
        OciRuntime.initPid(home.resolve("sandboxes").resolve(ref.id()).resolve("bundle"))
            .orElseThrow(() -> new AssertionError("local:" + ref.id() + " has no init"));
    String uid = Files.readString(Path.of("/proc", Long.toString(pid), "uid_map"));
    String gid = Files.readString(Path.of("/proc", Long.toString(pid), "gid_map"));
    assertThat(gid.strip()).as("local:%s maps gids as uids", ref.id()).isEqualTo(uid.strip());
    return uid;
  }

  /** {hostID, size} of a one-line uid_map. */
  private static long[] hostRange(String uidMap) {
    String[] f = uidMap.strip().split("\\s+");
    assertThat(f).as(uidMap).hasSize(3);
    return new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])};
  }

  @Test
  void checkpointMemoryImagesAreOwnerOnly() throws Exception {
    Prerequisites.require(
        Checkpoints.unavailable(sandboxes.engine().runtime()).isEmpty(),
        "checkpoint/restore (sandbox4j setup)");
    Workspace ws = Workspace.of(sandboxes.newBackend());
    WorkspaceRef ref = ws.open();
    ws.run(Command.shell("nohup sleep 600 >/dev/null 2>&1 </dev/null &"));
    sandboxes.hibernate(ref);
    Path images = home.resolve("sandboxes").resolve(ref.id()).resolve(Lifecycle.CHECKPOINT);
    assertThat(images).isDirectory();
    // owner-only from creation, not only behind the home's closed directories
    try (Stream<Path> files = Files.walk(images)) {
      for (Path p : files.toList()) {
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(p)))
            .as("the mode of checkpoint file " + p)
            .isIn("rw-------", "rwx------");
      }
    }
    assertThat(exposedToNobody(images)).isEmpty();
  }

  @Test
  void aHomeMadeBeforeIsTightened() throws Exception {
    Path old = Files.createDirectories(temp.resolve("old-home"));
    Files.setPosixFilePermissions(old, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path sandbox = Files.createDirectories(old.resolve("sandboxes/abc/bundle"));
    Files.writeString(old.resolve("sandboxes/abc/state.json"), "{}");
    Files.writeString(sandbox.resolve("config.json"), "{}");
    Path upper = Files.createDirectories(old.resolve("sandboxes/abc/upper/etc"));
    Files.writeString(upper.resolve("hostname"), "abc\n");
    Files.writeString(Files.createDirectories(old.resolve("network")).resolve("subnet"), "64\n");
    Files.writeString(old.resolve("supervisor.log"), "log\n");

    StateDirectory.ensure(old);

    assertThat(exposedToNobody(old)).isEmpty();
    assertThat(mode(old)).isEqualTo("rwx--x--x");
    assertThat(mode(old.resolve("sandboxes/abc"))).isEqualTo("rwx--x---");
    assertThat(mode(old.resolve("sandboxes/abc/state.json"))).isEqualTo("rw-------");
    assertThat(mode(old.resolve("supervisor.log"))).isEqualTo("rw-------");
    assertThat(mode(upper.resolve("hostname")))
        .as("a sandbox's own file keeps its mode")
        .isEqualTo("rw-r--r--");
  }

  @Test
  void aHomeTheSandboxesCannotReachIsRefusedWithItsReason() throws Exception {
    Path closed = Files.createDirectories(temp.resolve("closed"));
    Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
    List<String> progress = new java.util.concurrent.CopyOnWriteArrayList<>();
    LocalSandbox unreachable =
        LocalSandbox.builder().home(closed.resolve("home")).progress(progress::add).build();
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> Workspace.of(unreachable.newBackend()).open())
        .hasMessageContaining(closed + " is mode rwx------")
        .hasMessageContaining("chmod o+x");
    // refused before anything is made: no image build (its mounts), nothing in the home
    assertThat(progress).as("progress before the refusal").isEmpty();
    assertThat(closed.resolve("home").resolve("images")).doesNotExist();
  }

  private static String mode(Path p) throws IOException {
    return PosixFilePermissions.toString(
        Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS));
  }

  /**
   * The paths under {@code root} (and itself) that {@code nobody} can read (a file's bytes, a
   * directory's names) or write, through whatever the directories on the way allow: one shell as
   * nobody tests them all.
   */
  private static List<String> exposedToNobody(Path root) throws Exception {
    List<String> paths = new ArrayList<>();
    try (Stream<Path> all = Files.walk(root)) {
      all.forEach(p -> paths.add(p.toString()));
    }
    CommandResult r =
        asNobodyWithInput(
            String.join("\n", paths) + "\n",
            "/bin/sh",
            "-c",
            "while IFS= read -r f; do"
                + " if [ ! -L \"$f\" ] && { [ -r \"$f\" ] || [ -w \"$f\" ]; }; then echo \"$f\"; fi;"
                + " done");
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
    return r.stdoutText().lines().toList();
  }

  private static CommandResult asNobody(List<Integer> groups, String... argv) throws Exception {
    return asNobodyWith(groups, null, argv);
  }

  private static CommandResult asNobodyWithInput(String input, String... argv) throws Exception {
    return asNobodyWith(List.of(), input, argv);
  }

  private static CommandResult asNobodyWith(List<Integer> groups, String input, String... argv)
      throws Exception {
    return asUserWith(NOBODY, groups, input, argv);
  }

  /** Runs {@code argv} as host uid and gid {@code user} with {@code groups}, nothing else. */
  private static CommandResult asUserWith(
      int user, List<Integer> groups, String input, String... argv) throws Exception {
    List<String> command = new ArrayList<>();
    command.add("setpriv");
    command.add("--reuid=" + user);
    command.add("--regid=" + user);
    if (groups.isEmpty()) {
      command.add("--clear-groups");
    } else {
      command.add("--groups=" + String.join(",", groups.stream().map(String::valueOf).toList()));
    }
    // setpriv keeps its capabilities until its own exec: a shell in between does the exec as the
    // user alone, as a real one would.
    command.addAll(List.of("--", "/bin/sh", "-c", "exec \"$@\"", "sh"));
    command.addAll(List.of(argv));
    Path out = Files.createTempFile(temp, "out", "");
    Path err = Files.createTempFile(temp, "err", "");
    Process p =
        new ProcessBuilder(command)
            .directory(Path.of("/").toFile())
            .redirectOutput(out.toFile())
            .redirectError(err.toFile())
            .start();
    try (var stdin = p.getOutputStream()) {
      if (input != null) {
        stdin.write(input.getBytes(StandardCharsets.UTF_8));
      }
    }
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("%s ends", command).isTrue();
    return new CommandResult(p.exitValue(), Files.readAllBytes(out), Files.readAllBytes(err));
  }

  private static List<ProcessHandle> supervisors() {
    return ProcessHandle.allProcesses()
        .filter(
            p ->
                p.info()
                    .arguments()
                    .map(a -> String.join(" ", a).contains(Supervisor.class.getName() + " " + home))
                    .orElse(false))
        .toList();
  }
}
