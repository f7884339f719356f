package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Docker sandboxes for a user who is not root (issue 16, "Linux without root"): the CLI, run as a
 * uid of its own with only the {@code docker} group, creates, uses and removes a sandbox. It keeps
 * its state in its own home ({@code ~/.sandbox4j}), never in root's, and gets the default image
 * that is already in the daemon (its own store has none, and it cannot build one); its timers are
 * kept by a supervisor of its own. Egress through the proxy needs root on this host, so it asks for
 * {@code --egress none}.
 *
 * <p>The CLI runs as a child process switched to that user with {@code setpriv}, from a copy of
 * this test's class path it can read (hard links where it can: the Maven repository is root's).
 */
class NonRootDockerCliTest {
  /** A uid and gid no account here uses; the process gets only the docker group besides. */
  private static final int UID = 64_123;

  private static int dockerGid;

  @TempDir static Path temp;

  @BeforeAll
  static void requirePrerequisites() throws Exception {
    Prerequisites.require(
        Files.exists(Path.of("/var/run/docker.sock")), "a Docker daemon on /var/run/docker.sock");
    Prerequisites.require(SandboxHome.isRoot(), "root, to run the CLI as another user");
    Prerequisites.require(Files.isExecutable(Path.of("/usr/bin/setpriv")), "setpriv (util-linux)");
    dockerGid = (Integer) Files.getAttribute(Path.of("/var/run/docker.sock"), "unix:gid");
    Prerequisites.require(dockerGid != 0, "a docker socket of the docker group, not root's");
    readableBy(temp); // JUnit makes it 0700
    // The default image in the daemon, imported from root's store if it is not yet (what root's
    // first docker sandbox on this machine does): the user cannot build one.
    var out = new java.io.ByteArrayOutputStream();
    var err = new java.io.ByteArrayOutputStream();
    try (var o = new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8);
        var e = new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8)) {
      CliContext asRoot =
          new CliContext(
              SandboxHome.ofThisProcess(), new java.io.ByteArrayInputStream(new byte[0]), o, e);
      int code = Cli.run(asRoot, create("--egress", "none"));
      assertThat(code).as("root's docker sandbox: %s", err).isZero();
      assertThat(Cli.run(asRoot, "rm", out.toString().strip())).isZero();
    }
  }

  record Run(int exitCode, String out, String err) {}

  /** The arguments of a quiet {@code create} of a labelled docker sandbox, with {@code options}. */
  private static String[] create(String... options) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "--quiet", "create", "--provider", "docker", "--label", "sandbox4j.test=nonroot"));
    args.addAll(List.of(options));
    return args.toArray(String[]::new);
  }

  @Test
  void aUserInTheDockerGroupCreatesUsesAndRemovesASandboxWithStateOfItsOwn() throws Exception {
    Path home = readableBy(Files.createDirectory(temp.resolve("home")));
    Files.setAttribute(home, "unix:uid", UID);
    Files.setAttribute(home, "unix:gid", UID);
    List<String> classPath = readableClassPath();

    Run withDefaultEgress = asUser(home, classPath, create());
    assertThat(withDefaultEgress.exitCode())
        .as("the egress network needs root on this host")
        .isNotZero();
    assertThat(withDefaultEgress.err())
        .contains("this process is not root")
        .contains("--egress none");

    Run create = asUser(home, classPath, create("--egress", "none", "--idle-timeout", "10m"));
    assertThat(create.exitCode()).as(create.err()).isZero();
    String ref = create.out().strip();
    assertThat(ref).matches("docker:[0-9a-f]{12}");
    try {
      Run exec =
          asUser(
              home,
              classPath,
              "exec",
              ref,
              "--",
              "sh",
              "-c",
              "id -un; echo hi > /tmp/x; cat /tmp/x");
      assertThat(exec.exitCode()).as(exec.err()).isZero();
      assertThat(exec.out()).isEqualTo("sandbox\nhi\n");
      Run ls = asUser(home, classPath, "ls", "--provider", "docker", "--json");
      assertThat(ls.exitCode()).as(ls.err()).isZero();
      assertThat(ls.out()).contains(ref.substring("docker:".length()));
    } finally {
      Run rm = asUser(home, classPath, "rm", ref);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
    // its supervisor (it kept the timer) ends on its own, 10 s after the daemon's last sandbox
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!processesOfTheUser().isEmpty() && System.nanoTime() < end) {
      Thread.sleep(200);
    }
    assertThat(processesOfTheUser()).as("processes of the user left running").isEmpty();
    Path state = home.resolve(".sandbox4j").resolve("docker");
    assertThat(state).as("its docker state (the sandbox's timer) is in its own home").isDirectory();
    assertThat(Files.getAttribute(state, "unix:uid")).isEqualTo(UID);
  }

  private static List<String> processesOfTheUser() {
    return ProcessHandle.allProcesses()
        .filter(
            p -> {
              try {
                return Integer.valueOf(UID)
                    .equals(Files.getAttribute(Path.of("/proc/" + p.pid()), "unix:uid"));
              } catch (IOException | RuntimeException gone) {
                return false;
              }
            })
        .map(p -> p.pid() + " " + p.info().commandLine().orElse("?"))
        .toList();
  }

  /** Runs the CLI's main class as {@link #UID} with the docker group, HOME {@code home}. */
  private static Run asUser(Path home, List<String> classPath, String... args) throws Exception {
    List<String> command =
        new ArrayList<>(
            List.of(
                "/usr/bin/setpriv",
                "--reuid=" + UID,
                "--regid=" + UID,
                "--groups=" + dockerGid,
                "--inh-caps=-all",
                "--bounding-set=-all",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED",
                "-Duser.home=" + home, // no account has this uid: nothing else would say
                "-cp",
                String.join(File.pathSeparator, classPath),
                Main.class.getName()));
    command.addAll(List.of(args));
    Path out = Files.createTempFile(temp, "out", "");
    Path err = Files.createTempFile(temp, "err", "");
    ProcessBuilder pb =
        new ProcessBuilder(command)
            .directory(home.toFile())
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .redirectOutput(out.toFile())
            .redirectError(err.toFile());
    pb.environment().remove("SANDBOX4J_HOME");
    pb.environment().put("HOME", home.toString());
    pb.environment().put("SANDBOX4J_RESIDENT", "off");
    Process p = pb.start();
    assertThat(p.waitFor(180, TimeUnit.SECONDS)).as("%s finished", List.of(args)).isTrue();
    return new Run(p.exitValue(), Files.readString(out), Files.readString(err));
  }

  /**
   * This test's class path, each entry linked (or copied) under a directory anyone may read: the
   * entries live in root's Maven repository and build directories.
   */
  private static List<String> readableClassPath() throws IOException {
    Path dir = readableBy(Files.createDirectory(temp.resolve("classpath")));
    List<String> out = new ArrayList<>();
    int n = 0;
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      Path from = Path.of(entry);
      if (!Files.exists(from)) {
        continue;
      }
      Path to = dir.resolve(n++ + "-" + from.getFileName());
      if (Files.isDirectory(from)) {
        copyTree(from, to);
      } else {
        try {
          Files.createLink(to, from);
        } catch (IOException | UnsupportedOperationException otherFileSystem) {
          Files.copy(from, to);
        }
        Files.setPosixFilePermissions(to, PosixFilePermissions.fromString("rw-r--r--"));
      }
      out.add(to.toString());
    }
    return out;
  }

  private static void copyTree(Path from, Path to) throws IOException {
    try (var all = Files.walk(from)) {
      for (Path p : all.toList()) {
        Path target = to.resolve(from.relativize(p).toString());
        if (Files.isDirectory(p)) {
          readableBy(Files.createDirectories(target));
        } else {
          Files.copy(p, target);
          Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("rw-r--r--"));
        }
      }
    }
  }

  private static Path readableBy(Path dir) throws IOException {
    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
    return dir;
  }
}
