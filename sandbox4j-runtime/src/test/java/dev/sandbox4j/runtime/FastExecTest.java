package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fast exec path (issue 18): commands forked by the exec helper inside each sandbox keep every
 * guarantee of a {@code crun exec}: the same confinement, a cgroup per command whose kill ends
 * setsid'd and double-forked daemons, a clear failure when code in the sandbox kills or
 * impersonates the helper (and a working next command), and a helper of its own after a fork and a
 * hibernate.
 */
class FastExecTest {
  /** A bound for waits that end at an event; only there to turn a hang into a failure. */
  private static final Duration PATIENCE = Duration.ofSeconds(60);

  private static LocalSandbox sandboxes;
  private Workspace ws;
  private WorkspaceRef ref;

  @BeforeAll
  static void setUp() {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(OciConfig.hasExecHelper(), "the exec helper (sandbox4j setup)");
    sandboxes = LocalSandbox.builder().progress(line -> {}).build();
  }

  @BeforeEach
  void create() {
    ws = Workspace.of(sandboxes.newBackend());
    ref = ws.open();
  }

  @AfterEach
  void destroy() {
    System.clearProperty("sandbox4j.fastExec");
    sandboxes.destroy(ref);
  }

  private static String sh(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(PATIENCE));
    assertThat(r.succeeded()).as(script + " gave " + r).isTrue();
    return r.stdoutText();
  }

  /** Whether the command's parent is the helper's keeper: the fast path ran it. */
  private static boolean viaHelper(Workspace ws) {
    return sh(ws, "cat /proc/$PPID/comm").equals("sandbox4j-execd\n");
  }

  @Test
  void commandsRunThroughTheHelper() {
    assertThat(viaHelper(ws)).isTrue();
    assertThat(ws.run(Command.argv("/no/such/program")).exitCode()).isEqualTo(127);
    assertThat(ws.run(Command.argv("/etc/hostname")).exitCode()).isEqualTo(126);
    assertThat(ws.run(Command.shell("kill -9 $$")).exitCode()).isEqualTo(137);
    assertThat(ws.run(Command.shell("exit 3")).exitCode()).isEqualTo(3);
    CommandResult in =
        ws.run(
            Command.shell("cat; echo err >&2"),
            RunOptions.builder().stdin("from stdin".getBytes()).build());
    assertThat(in.stdoutText()).isEqualTo("from stdin");
    assertThat(in.stderrText()).isEqualTo("err\n");
  }

  /** The same user, groups, capabilities, seccomp, no_new_privs, limits, env and cwd either way. */
  @Test
  void theConfinementIsCrunExecs() {
    Engine engine = sandboxes.engine();
    String probe =
        "id; grep -E '^(Uid|Gid|Groups|Cap|NoNewPrivs|Seccomp)' /proc/self/status; pwd; ulimit -a;"
            + " env | sort; cat /proc/self/cgroup | sed 's/cmd-[a-z0-9]*/cmd-X/'";
    Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "FOO", "bar baz");
    for (String user : List.of("0:0", "1000:1000", "1234:1234")) {
      String fast = probe(engine, user, env, probe);
      System.setProperty("sandbox4j.fastExec", "false");
      String slow;
      try {
        slow = probe(engine, user, env, probe);
      } finally {
        System.clearProperty("sandbox4j.fastExec");
      }
      assertThat(fast).as("as " + user).isEqualTo(slow);
    }
  }

  private String probe(Engine engine, String user, Map<String, String> env, String script) {
    CommandResult r =
        Exec.run(
            engine,
            ref.id(),
            user,
            "/tmp",
            env,
            List.of("/bin/sh", "-c", script),
            RunOptions.withTimeout(PATIENCE),
            System.nanoTime());
    assertThat(r.succeeded()).as(r.toString()).isTrue();
    return r.stdoutText();
  }

  @Test
  void aTimeoutKillsSetsidAndDoubleForkedDaemons() {
    assertThat(viaHelper(ws)).isTrue();
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell(
                        "setsid sh -c 'sleep 6011 &'; (sleep 6012 &); setsid -f sleep 6013;"
                            + " nohup sleep 6014 >/dev/null 2>&1 & exec sleep 6015"),
                    RunOptions.withTimeout(Duration.ofSeconds(3))))
        .isInstanceOf(WorkspaceTimeoutException.class);
    assertThat(sh(ws, "pgrep -af 'sleep 601[1-5]' || true"))
        .as("every process the command started was killed")
        .isEmpty();
  }

  @Test
  void theHelperKilledMidCommandFailsItClearlyAndTheNextCommandWorks() throws Exception {
    assertThat(viaHelper(ws)).isTrue();
    CompletableFuture<Object> running =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return ws.run(Command.shell("exec sleep 6021"), RunOptions.withTimeout(PATIENCE));
              } catch (RuntimeException e) {
                return e;
              }
            });
    long end = System.nanoTime() + PATIENCE.toNanos();
    while (sh(ws, "pgrep -f 'sleep 602[1]' || true").isEmpty() && System.nanoTime() < end) {
      Thread.sleep(20);
    }
    // code in the sandbox (root through sudo) kills the helper: the oldest process running it
    try {
      ws.run(Command.shell("sudo kill -9 $(pgrep -o -f /dev/sandbox4j-execd)"));
    } catch (WorkspaceException e) {
      // its own command went with the helper: that is the same clear failure
    }
    Object outcome = running.get();
    assertThat(outcome)
        .as("the running command fails, saying why, rather than returning an exit code")
        .isInstanceOf(WorkspaceException.class);
    assertThat(((Exception) outcome).getMessage()).contains("exec helper");
    assertThat(sh(ws, "pgrep -f 'sleep 602[1]' || true"))
        .as("and every process it started was killed")
        .isEmpty();
    assertThat(sh(ws, "echo next")).isEqualTo("next\n");
    assertThat(viaHelper(ws)).as("a new helper runs the next commands").isTrue();
  }

  /**
   * Root in the sandbox takes the helper's socket (pidfd_getfd) and writes forged replies: a start
   * of pid 1 (the init) for every request id, garbage. The engine gives the helper up at the first
   * message it cannot believe; no process is moved, and the next command runs with a new helper.
   */
  @Test
  void forgedRepliesOnTheHelpersSocketAreRefused() throws Exception {
    assertThat(viaHelper(ws)).isTrue();
    String attack =
        "import ctypes, os, struct, sys\n"
            + "libc = ctypes.CDLL(None, use_errno=True)\n"
            + "pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
            + "def cmd(p):\n"
            + "    try: return open('/proc/%d/cmdline' % p, 'rb').read()\n"
            + "    except OSError: return b''\n"
            + "helper = min(p for p in pids if cmd(p).startswith(b'/dev/sandbox4j-execd'))\n"
            + "pidfd = libc.syscall(434, helper, 0)\n"
            + "sock = libc.syscall(438, pidfd, 1, 0) if pidfd >= 0 else -1\n"
            + "print('socket', 'taken' if sock >= 0 else 'refused: errno %d' % ctypes.get_errno())\n"
            + "sys.stdout.flush()\n"
            + "if sock >= 0:\n"
            + "    for req in range(0, 64):\n"
            + "        os.write(sock, struct.pack('=IIii', 1, req, 1, 0))\n"
            + "    os.write(sock, b'\\xff' * 4096)\n";
    ws.writeText("/tmp/attack.py", attack);
    String said;
    try {
      said = ws.run(Command.shell("sudo python3 /tmp/attack.py")).toString();
    } catch (WorkspaceException e) {
      said = e.getMessage(); // its own command ran through the helper it broke
    }
    Path bundle = sandboxes.engine().dir(ref.id()).resolve("bundle");
    long init = OciRuntime.initPid(bundle).orElseThrow();
    assertThat(Files.readString(Path.of("/proc/" + init + "/cgroup")))
        .as("the init was not moved into a command's cgroup (%s)", said)
        .doesNotContain("cmd-");
    assertThat(sh(ws, "echo still fine")).isEqualTo("still fine\n");
    assertThat(viaHelper(ws)).isTrue();
  }

  @Test
  void commandsLeaveNoCgroupBehindNorDoesAJvmThatRanOne(@TempDir Path temp) throws Exception {
    assertThat(viaHelper(ws)).isTrue();
    long init =
        OciRuntime.initPid(sandboxes.engine().dir(ref.id()).resolve("bundle")).orElseThrow();
    Path sandbox = v2Dir(init);
    for (int i = 0; i < 30; i++) {
      sh(ws, "true");
    }
    awaitCommandGroups(sandbox, 2); // the helper's own, and its spare keeper's

    // another JVM runs a command here and exits: its helper's group goes with it
    Path program = temp.resolve("OneCommand.java");
    Files.writeString(
        program,
        """
        public class OneCommand {
          public static void main(String[] a) {
            var sandboxes = dev.sandbox4j.runtime.LocalSandbox.builder().progress(l -> {}).build();
            var ws = dev.sandbox4j.workspace.Workspace.of(
                sandboxes.backend(dev.sandbox4j.workspace.WorkspaceRef.parse(a[0])).orElseThrow());
            System.out.println(ws.run(dev.sandbox4j.workspace.Command.shell("true")).exitCode());
          }
        }
        """);
    Process p =
        new ProcessBuilder(
                ProcessHandle.current().info().command().orElse("java"),
                "--enable-native-access=ALL-UNNAMED",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                System.getProperty("java.class.path"),
                program.toString(),
                ref.toString())
            .redirectErrorStream(true)
            .start();
    String said = new String(p.getInputStream().readAllBytes());
    assertThat(p.waitFor()).as(said).isZero();
    assertThat(said).endsWith("0\n");
    awaitCommandGroups(sandbox, 2);
  }

  /**
   * Sets {@code spare} to the helper's spare keeper, as the sandbox's user sees it from a command:
   * the helper's child that is not this command's keeper (the helper makes it as the command
   * starts, so it is waited for).
   */
  private static final String FIND_SPARE =
      "helper=$(pgrep -o -f /dev/sandbox4j-execd); mine=$(cut -d' ' -f4 /proc/$$/stat); spare=;"
          + " for i in $(seq 100); do for p in $(pgrep -P $helper); do [ $p = $mine ] ||"
          + " spare=$p; done; [ -n \"$spare\" ] && break; sleep 0.05; done; ";

  /**
   * The spare keeper that the next command starts in holds nothing of the engine's (no pipe of a
   * command), the sandbox's user cannot signal it, and root killing it costs no command: the next
   * one starts the usual way, in the spare's cgroup, and the helper makes another spare.
   */
  @Test
  void theSpareKeeperHoldsNothingAndKillingItCostsNoCommand() {
    assertThat(viaHelper(ws)).isTrue();
    String seen =
        sh(
            ws,
            FIND_SPARE
                + "echo $spare; sudo ls /proc/$spare/fd | wc -l;"
                + " sudo readlink /proc/$spare/fd/0 /proc/$spare/fd/1 /proc/$spare/fd/2;"
                + " kill -0 $spare 2>/dev/null && echo signalled || echo refused;"
                + " sudo kill -9 $spare");
    String[] lines = seen.split("\n");
    assertThat(lines).as(seen).hasSize(6);
    String spare = lines[0];
    assertThat(lines[1].strip())
        .as("/dev/null as stdio, its socket to the helper, its report pipe: " + seen)
        .isEqualTo("5");
    assertThat(List.of(lines[2], lines[3], lines[4])).containsOnly("/dev/null");
    assertThat(lines[5]).as("the sandbox's user cannot signal it").isEqualTo("refused");

    // the next command claims the killed spare, finds it gone, and starts the usual way
    assertThat(sh(ws, "echo after")).isEqualTo("after\n");
    assertThat(viaHelper(ws)).as("the same helper, still serving").isTrue();
    assertThat(sh(ws, FIND_SPARE + "echo $spare").strip()).as("a new spare").isNotEqualTo(spare);
    for (int i = 0; i < 5; i++) {
      assertThat(sh(ws, "echo " + i)).isEqualTo(i + "\n");
    }
  }

  /** The cgroup v2 directory of host process {@code pid}, where this host mounts that hierarchy. */
  private static Path v2Dir(long pid) throws java.io.IOException {
    String relative =
        Files.readAllLines(Path.of("/proc/" + pid + "/cgroup")).stream()
            .filter(l -> l.startsWith("0::"))
            .findFirst()
            .orElseThrow()
            .substring(3);
    String mount =
        Files.readAllLines(Path.of("/proc/self/mountinfo")).stream()
            .filter(l -> l.contains(" - cgroup2 "))
            .map(l -> l.split(" ")[4])
            .findFirst()
            .orElseThrow();
    return Path.of(mount + relative);
  }

  /**
   * Waits up to 10 s (a busy group is removed again later) until {@code n} command groups are left.
   */
  private static void awaitCommandGroups(Path sandbox, int n) throws Exception {
    long end = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    List<Path> groups;
    do {
      try (var dirs = Files.list(sandbox)) {
        groups = dirs.filter(d -> d.getFileName().toString().startsWith("cmd-")).toList();
      }
      if (groups.size() == n) {
        return;
      }
      Thread.sleep(50);
    } while (System.nanoTime() < end);
    assertThat(groups).as("the command cgroups left in %s", sandbox).hasSize(n);
  }

  @Test
  void aForkAndAHibernatedSandboxRunCommandsThroughHelpersOfTheirOwn() {
    assertThat(viaHelper(ws)).isTrue();
    Prerequisites.require(
        Checkpoints.unavailable(sandboxes.engine().runtime()).isEmpty(), "checkpoint/restore");
    sh(ws, "nohup sleep 6031 >/dev/null 2>&1 &");
    // another engine on the same home (another JVM's, the resident CLI's) has a helper there too
    LocalSandbox another = LocalSandbox.builder().progress(line -> {}).build();
    Workspace there = Workspace.of(another.backend(ref).orElseThrow());
    assertThat(viaHelper(there)).isTrue();
    ForkResult fork = sandboxes.fork(ref);
    try {
      assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
      assertThat(fork.notCarried()).as("the helpers are the engines', not carried").isEmpty();
      Workspace child = Workspace.of(sandboxes.backend(fork.ref()).orElseThrow());
      assertThat(sh(child, "hostname")).isEqualTo(fork.ref().id() + "\n");
      assertThat(viaHelper(child)).isTrue();
      assertThat(sh(ws, "hostname")).isEqualTo(ref.id() + "\n");
      assertThat(viaHelper(ws)).isTrue();
    } finally {
      sandboxes.destroy(fork.ref());
    }
    sandboxes.hibernate(ref);
    assertThat(sh(ws, "pgrep -f 'sleep 603[1]' >/dev/null && echo restored"))
        .isEqualTo("restored\n");
    assertThat(viaHelper(ws)).isTrue();
  }
}
