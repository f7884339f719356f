package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Issue 13, item 8: code in a sandbox replaces what the engine touches from the host ({@code /etc},
 * {@code /etc/hostname}, {@code /etc/hosts}, the CA directory, its home) with a symlink to a host
 * directory, absolute or relative (with enough {@code ../} to reach the host's {@code /} from
 * wherever the engine keeps the layer), or with a FIFO that would block a read; then each engine
 * operation on its files runs. The host directory must be exactly as before (listing, modes, owners
 * and content hashes), and the operation either succeeds without following the link or fails with a
 * clear error. Real sandboxes of a busybox image, in a private home.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class HostilePathsTest {
  /** Enough {@code ../} to reach {@code /} from any layer of the engine. */
  private static final String UP = "../".repeat(24);

  @TempDir static Path shared;
  private static Path home;
  private static LocalSandbox sandboxes;

  @TempDir Path temp;
  private Path victim;
  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  /**
   * How the sandbox replaces its files; {@code %V} is the host directory, without its leading /.
   */
  enum Shape {
    /** {@code /etc} is an absolute symlink to the host directory. */
    ETC_ABSOLUTE("rm -rf /etc && ln -s /%V /etc"),
    /** {@code /etc} is a relative symlink that climbs to the host's / and down to it. */
    ETC_RELATIVE("rm -rf /etc && ln -s " + UP + "%V /etc"),
    /** {@code /etc/hostname} and {@code /etc/hosts} are symlinks to files in it. */
    FILES("ln -sf /%V/hostname /etc/hostname && ln -sf " + UP + "%V/hosts /etc/hosts"),
    /** {@code /etc/hosts} is a FIFO (a read of it would block), {@code /etc/hostname} a link. */
    FIFO("rm -f /etc/hosts && mkfifo /etc/hosts && ln -sf /%V/hostname /etc/hostname");

    final String script;

    Shape(String script) {
      this.script = script;
    }
  }

  @BeforeAll
  static void importImage() throws Exception {
    Prerequisites.requireLocalEngine();
    TestImages.requireBusybox();
    home = TestImages.privateHome(shared);
    Path rootfs = TestImages.busyboxRootfs(shared.resolve("rootfs"));
    Files.writeString(rootfs.resolve("etc/hostname"), "image\n");
    Files.writeString(rootfs.resolve("etc/hosts"), "127.0.0.1\tlocalhost\n");
    // update-ca-certificates, for the CA installation of an intercepting egress policy
    Path sbin = Files.createDirectories(rootfs.resolve("usr/sbin"));
    Files.writeString(sbin.resolve("update-ca-certificates"), "#!/bin/sh\nexit 0\n");
    Files.setAttribute(sbin.resolve("update-ca-certificates"), "unix:mode", 0755);
    Path archive = TestImages.tar(rootfs, shared.resolve("bb.tar"));
    sandboxes = LocalSandbox.builder().home(home).image("bb").progress(line -> {}).build();
    sandboxes.engine().images().importArchive("bb", archive, line -> {});
  }

  @AfterAll
  static void deleteHome() throws IOException {
    TestImages.destroyAllAndDelete(sandboxes, home);
  }

  @BeforeEach
  void makeVictim() throws IOException {
    victim = Files.createDirectories(temp.resolve("victim"));
  }

  @AfterEach
  void destroy() {
    for (WorkspaceRef ref : own) {
      sandboxes.destroy(ref);
    }
    own.clear();
  }

  // ---- fork -----------------------------------------------------------------------------------

  @ParameterizedTest
  @EnumSource(Shape.class)
  void aFilesOnlyForkNeverFollowsTheSandboxsLinks(Shape shape) throws Exception {
    Workspace parent = hostile(shape, null);
    Map<String, String> before = state(victim);

    ForkResult fork = sandboxes.forkFiles(parent.open());
    own.add(fork.ref());

    assertThat(state(victim)).as("the host directory after the fork").isEqualTo(before);
    assertRuns(fork.ref());
    assertRenamedWhereItCan(shape, fork.ref());
  }

  @ParameterizedTest
  @EnumSource(Shape.class)
  void aLiveForkNeverFollowsTheSandboxsLinks(Shape shape) throws Exception {
    requireCheckpoints();
    Workspace parent = hostile(shape, null);
    check(parent, "nohup sleep 600 >/dev/null 2>&1 </dev/null &");
    Map<String, String> before = state(victim);

    ForkResult fork = sandboxes.fork(parent.open());
    own.add(fork.ref());

    assertThat(state(victim)).as("the host directory after the fork").isEqualTo(before);
    assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
    assertRuns(fork.ref());
    assertRenamedWhereItCan(shape, fork.ref());
  }

  // ---- snapshot, hibernate, stop ----------------------------------------------------------------

  @ParameterizedTest
  @EnumSource(Shape.class)
  void aSnapshotAndASandboxMadeOfItNeverFollowTheLinks(Shape shape) throws Exception {
    Workspace parent = hostile(shape, null);
    Map<String, String> before = state(victim);
    String name = "hostile-" + shape.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');

    sandboxes.snapshot(parent.open(), name);
    try {
      Workspace child =
          Workspace.of(
              LocalSandbox.builder()
                  .home(home)
                  .snapshot(name)
                  .progress(line -> {})
                  .build()
                  .newBackend());
      own.add(child.open());
      assertThat(state(victim)).as("the host directory after snapshot + create").isEqualTo(before);
      assertRuns(child.open());
    } finally {
      sandboxes.removeSnapshot(name);
    }
  }

  @ParameterizedTest
  @EnumSource(Shape.class)
  void hibernateAndWakeNeverFollowTheLinks(Shape shape) throws Exception {
    requireCheckpoints();
    Workspace ws = hostile(shape, null);
    Map<String, String> before = state(victim);

    sandboxes.hibernate(ws.open());
    sandboxes.start(ws.open());

    assertThat(state(victim)).as("the host directory after hibernate + wake").isEqualTo(before);
    assertRuns(ws.open());
  }

  @ParameterizedTest
  @EnumSource(Shape.class)
  void stopAndStartNeverFollowTheLinks(Shape shape) throws Exception {
    Workspace ws = hostile(shape, null);
    Map<String, String> before = state(victim);

    sandboxes.stop(ws.open());
    sandboxes.start(ws.open());

    assertThat(state(victim)).as("the host directory after stop + start").isEqualTo(before);
    assertRuns(ws.open());
  }

  // ---- networks and the CA ----------------------------------------------------------------------

  /**
   * A named network's members get a {@code hosts} file bind-mounted at {@code /etc/hosts} (crun
   * resolves that inside the root; the mount also keeps a running member from replacing it),
   * rewritten as members come and go. Here the hostile files come from a snapshot the member is
   * made of.
   */
  @ParameterizedTest
  @EnumSource(Shape.class)
  void aNetworksHostsFilesNeverFollowTheLinks(Shape shape) throws Exception {
    String net = "hp" + Long.toString(System.nanoTime() % 1_000_000, 36);
    Workspace hostile = hostile(shape, null);
    String name =
        "hostile-net-" + shape.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
    sandboxes.snapshot(hostile.open(), name);
    try {
      Map<String, String> before = state(victim);
      LocalSandbox onNet =
          LocalSandbox.builder()
              .home(home)
              .snapshot(name)
              .network(net)
              .progress(line -> {})
              .build();
      Workspace member = Workspace.of(onNet.newBackend());
      own.add(member.open());
      Workspace peer = create(net); // rewrites every member's hosts
      onNet.stop(member.open());
      onNet.start(member.open());
      assertThat(check(member, "echo alive")).isEqualTo("alive\n");
      onNet.destroy(peer.open()); // rewrites them again

      assertThat(state(victim))
          .as("the host directory after the network changed")
          .isEqualTo(before);
    } finally {
      sandboxes.removeSnapshot(name);
    }
  }

  @ParameterizedTest
  @EnumSource(
      value = Shape.class,
      names = {"ETC_ABSOLUTE", "ETC_RELATIVE"})
  void theProxyCaIsInstalledInsideTheSandboxNeverThroughItsLinks(Shape shape) throws Exception {
    Workspace ws = create(null);
    WorkspaceRef ref = ws.open();
    seedVictim(ref.id());
    String dir = "/usr/local/share/ca-certificates";
    String link = shape == Shape.ETC_ABSOLUTE ? "/" + rel(victim) : UP + rel(victim);
    asRoot(ref, "mkdir -p /usr/local/share && rm -rf " + dir + " && ln -s " + link + " " + dir);
    Map<String, String> before = state(victim);

    try {
      sandboxes.setEgress(ref, EgressPolicy.allow("example.com").withInterceptTls(true));
    } catch (WorkspaceException e) {
      // Its own trust store is broken: refused, and said where.
      assertThat(e).hasMessageContaining("ca-certificates");
    }

    assertThat(state(victim)).as("the host directory after the CA install").isEqualTo(before);
    assertRuns(ref);
  }

  // ---- the file API ---------------------------------------------------------------------------

  @ParameterizedTest
  @EnumSource(
      value = Shape.class,
      names = {"ETC_ABSOLUTE", "ETC_RELATIVE"})
  void theFileApiNeverFollowsTheLinksOutOfTheSandbox(Shape shape) throws Exception {
    Workspace ws = hostile(shape, null);
    String link = shape == Shape.ETC_ABSOLUTE ? "/" + rel(victim) : UP + rel(victim);
    asRoot(ws.open(), "rm -rf /home/sandbox && ln -s " + link + " /home/sandbox");
    Map<String, String> before = state(victim);

    List<Supplier<Object>> operations =
        List.of(
            () -> read(ws, "/etc/hostname"),
            () -> read(ws, "/home/sandbox/hosts"),
            () -> ws.list("/etc"),
            () -> ws.list("/home/sandbox"),
            () -> ws.stat("/home/sandbox/hostname"),
            () -> write(ws, "/etc/hostname", "owned\n"),
            () -> write(ws, "/home/sandbox/new", "owned\n"),
            () -> write(ws, "/etc/new/deeper", "owned\n"),
            () -> run(() -> ws.createDirectories("/etc/dir/sub")),
            () -> run(() -> ws.createDirectories("/home/sandbox/dir")),
            () -> run(() -> ws.rename("/etc/hosts", "/etc/moved")),
            () -> run(() -> ws.remove("/home/sandbox/hosts", false)),
            () -> run(() -> ws.remove("/etc/hostname", false)),
            () -> run(() -> ws.remove("/home/sandbox", true)));
    for (Supplier<Object> operation : operations) {
      try {
        operation.get();
      } catch (WorkspaceException refused) {
        // refused (not found, not a directory, ...): allowed
      }
      assertThat(state(victim)).as("the host directory after a file operation").isEqualTo(before);
    }
  }

  @Test
  void theFileApiRefusesToReadAFifoAtOnce() throws Exception {
    Workspace ws = hostile(Shape.FIFO, null);
    assertThatThrownBy(() -> read(ws, "/etc/hosts"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("/etc/hosts");
  }

  // ---- helpers ----------------------------------------------------------------------------------

  private static void requireCheckpoints() {
    var why = Checkpoints.unavailable(sandboxes.engine().runtime());
    Prerequisites.require(why.isEmpty(), "checkpoint/restore: " + why.orElse(""));
  }

  private Workspace create(String network) {
    LocalSandbox.Builder b = LocalSandbox.builder().home(home).image("bb").progress(line -> {});
    if (network != null) {
      b.network(network);
    }
    Workspace ws = Workspace.of(b.build().newBackend());
    own.add(ws.open());
    return ws;
  }

  /**
   * A sandbox whose files {@code shape} replaced, and the host directory seeded with files that
   * name it (what a fork would rename if it wrote there).
   */
  private Workspace hostile(Shape shape, String network) throws IOException {
    Workspace ws = create(network);
    WorkspaceRef ref = ws.open();
    seedVictim(ref.id());
    asRoot(ref, shape.script.replace("%V", rel(victim)));
    return ws;
  }

  private void seedVictim(String id) throws IOException {
    Files.writeString(victim.resolve("hostname"), id + "\n");
    Files.writeString(victim.resolve("hosts"), "127.0.1.1\t" + id + "\n");
    Files.writeString(victim.resolve("passwd"), "root:x:0:0:" + id + ":/root:/bin/sh\n");
    Files.createDirectories(victim.resolve("sub"));
    Files.writeString(victim.resolve("sub/keep"), id + "\n");
  }

  private static String rel(Path p) {
    return p.toAbsolutePath().toString().substring(1);
  }

  private static void asRoot(WorkspaceRef ref, String script) {
    Exec.checkAsRoot(sandboxes.engine(), ref.id(), List.of("/bin/sh", "-c", script));
  }

  private static String check(Workspace ws, String script) {
    CommandResult r = ws.run(dev.sandbox4j.workspace.Command.shell(script));
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
    return r.stdoutText();
  }

  private static void assertRuns(WorkspaceRef ref) {
    Workspace ws = Workspace.of(sandboxes.backend(ref).orElseThrow());
    assertThat(check(ws, "echo alive")).isEqualTo("alive\n");
  }

  /** Where the fork's files are plain, they carry its own name; the others stay as they were. */
  private void assertRenamedWhereItCan(Shape shape, WorkspaceRef fork) {
    if (shape == Shape.FIFO) {
      Workspace ws = Workspace.of(sandboxes.backend(fork).orElseThrow());
      assertThat(check(ws, "test -p /etc/hosts && readlink /etc/hostname"))
          .as("the FIFO and the link are copied as they are")
          .isEqualTo("/" + rel(victim) + "/hostname\n");
    }
  }

  private static String read(Workspace ws, String path) {
    return new String(ws.readBytes(path), StandardCharsets.UTF_8);
  }

  private static Object write(Workspace ws, String path, String content) {
    ws.write(path, new ByteArrayInputStream(content.getBytes(StandardCharsets.UTF_8)));
    return null;
  }

  private static Object run(Runnable r) {
    r.run();
    return null;
  }

  /** Every entry under {@code dir}: type, mode, owner and content hash (or link text). */
  static Map<String, String> state(Path dir) throws IOException {
    Map<String, String> out = new TreeMap<>();
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.toList()) {
        Map<String, Object> a =
            Files.readAttributes(p, "unix:mode,uid,gid,size", LinkOption.NOFOLLOW_LINKS);
        String what;
        if (Files.isSymbolicLink(p)) {
          what = "link " + Files.readSymbolicLink(p);
        } else if (Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
          what = "file " + TestImages.hex(ImageStore.sha256().digest(Files.readAllBytes(p)));
        } else {
          what = Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) ? "dir" : "other";
        }
        out.put(
            dir.relativize(p).toString(),
            what + " " + Integer.toOctalString((Integer) a.get("mode")) + " " + a.get("uid"));
      }
    }
    return out;
  }
}
