package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The resident CLI process and its thin client, as whole processes where it matters (the client's
 * {@code main}, a resident killed with {@code kill -9}) and over a raw socket for what a hostile
 * client may send. Host workspaces under a temporary home: no root needed, except for the peer
 * check, which needs a second user.
 */
class ResidentTest {

  @TempDir Path temp;

  private Path home;
  private Path work;
  private Map<String, String> env;
  private final List<Process> residents = new ArrayList<>();
  private Resident inJvm;

  record Run(int exitCode, String out, String err) {}

  @BeforeEach
  void setUp() throws IOException {
    home = Files.createDirectories(temp.resolve("home"));
    work = Files.createDirectories(temp.resolve("work"));
    env = new HashMap<>(System.getenv());
    env.keySet().removeIf(k -> k.startsWith("SANDBOX4J_"));
    env.put("SANDBOX4J_HOME", home.toString());
    env.put("XDG_RUNTIME_DIR", Files.createDirectories(temp.resolve("run")).toString());
  }

  @AfterEach
  void tearDown() throws Exception {
    for (Process p : residents) {
      p.destroyForcibly().waitFor();
    }
    if (inJvm != null) {
      inJvm.close();
    }
    // a resident a client started itself exits once its socket is gone with this directory
  }

  // ---- whole processes ------------------------------------------------------------------------

  /** Runs {@code sandbox4j args} as a process of this test's class path in {@link #work}. */
  private Run cli(String mode, byte[] stdin, String... args) throws Exception {
    List<String> command = new ArrayList<>(java());
    command.add(Main.class.getName());
    command.addAll(List.of(args));
    return process(command, mode, stdin);
  }

  /**
   * Runs {@code command} in {@link #work} with {@link #env} (and {@code mode}) and {@code stdin}.
   */
  private Run process(List<String> command, String mode, byte[] stdin) throws Exception {
    Map<String, String> e = new HashMap<>(env);
    if (mode != null) {
      e.put(ResidentClient.SWITCH, mode);
    }
    Path out = Files.createTempFile(temp, "out", "");
    Path err = Files.createTempFile(temp, "err", "");
    Path in = Files.write(Files.createTempFile(temp, "in", ""), stdin);
    ProcessBuilder pb =
        new ProcessBuilder(command)
            .directory(work.toFile())
            .redirectInput(in.toFile())
            .redirectOutput(out.toFile())
            .redirectError(err.toFile());
    pb.environment().clear();
    pb.environment().putAll(e);
    Process p = pb.start();
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("%s finished", command).isTrue();
    return new Run(p.exitValue(), Files.readString(out), Files.readString(err));
  }

  private Run inProcess(String... args) throws Exception {
    return cli("off", new byte[0], args);
  }

  private Run served(String... args) throws Exception {
    return cli("require", new byte[0], args);
  }

  private List<String> java() {
    return List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "--enable-native-access=ALL-UNNAMED",
        "-XX:+UseSerialGC", // as the launcher; and C1 only: a CLI run is too short for C2
        "-XX:TieredStopAtLevel=1",
        "-cp",
        System.getProperty("java.class.path"));
  }

  /** Starts a resident process for {@link #env} and returns once it listens. */
  private Process startResident() throws Exception {
    Path socket = ResidentClient.socket(env);
    List<String> command = new ArrayList<>(java());
    command.add(1, "-D" + ResidentClient.PROPERTY + "=" + socket);
    command.add(Main.class.getName());
    ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
    pb.environment().clear();
    pb.environment().putAll(env);
    Process p = pb.start();
    residents.add(p);
    BufferedReader lines =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    String line;
    while ((line = lines.readLine()) != null && !line.contains("serving on")) {
      // its log before it listens
    }
    assertThat(line).as("the resident's first line").isNotNull().contains(socket.toString());
    Thread.ofVirtual().start(() -> drain(p.getInputStream()));
    return p;
  }

  private static void drain(InputStream in) {
    try {
      in.transferTo(OutputStream.nullOutputStream());
    } catch (IOException ignored) {
      // gone
    }
  }

  private String createHostWorkspace() throws Exception {
    Run created = inProcess("--quiet", "create", "--provider", "host");
    assertThat(created.exitCode()).as(created.err()).isZero();
    return created.out().strip();
  }

  @Test
  void aResidentGivesTheSameOutputAndExitCodesAsTheInProcessCli() throws Exception {
    Path client = nativeClient();
    String ref = createHostWorkspace();
    Files.writeString(work.resolve("local.txt"), "from the caller's directory\n");
    startResident();
    List<List<String>> commands =
        List.of(
            List.of("--version"),
            List.of("--help"),
            List.of("ls"),
            List.of("ls", "--json"),
            List.of("exec", ref, "--", "sh", "-c", "echo out; echo err >&2; exit 3"),
            List.of("exec", ref, "--", "printf", "caf\u00e9 \u2713"),
            List.of("exec", "host:doesnotexist", "--", "true"),
            List.of("exec", ref, "--bogus", "true"),
            List.of("exec", ref, "--timeout", "1ms", "--", "sleep", "5"),
            List.of("cp", "local.txt", ref + ":/copied.txt"),
            List.of("exec", ref, "--", "cat", "copied.txt"),
            List.of("cp", "nosuchfile", ref + ":/x"),
            List.of("rm", "host:doesnotexist"));
    for (List<String> command : commands) {
      String[] args = command.toArray(String[]::new);
      Run through = served(args);
      Run local = inProcess(args);
      assertThat(through).as("sandbox4j %s through the resident", command).isEqualTo(local);
      // a JVM the native client started would fail on NO_JVM: the same result proves the
      // resident served it
      Run direct = viaNative(client, null, new byte[0], List.of(NO_JVM), args);
      assertThat(direct).as("sandbox4j %s, native client", command).isEqualTo(local);
    }
  }

  @Test
  void stdinIsStreamedAndHostPathsAreTheCallers() throws Exception {
    Path client = nativeClient();
    String ref = createHostWorkspace();
    startResident();
    byte[] input = "line one\nline two\n".getBytes(StandardCharsets.UTF_8);
    Run through = cli("require", input, "exec", "--stdin", ref, "--", "wc", "-l");
    Run local = cli("off", input, "exec", "--stdin", ref, "--", "wc", "-l");
    assertThat(through).isEqualTo(local);
    assertThat(through.out().strip()).isEqualTo("2");
    Run direct =
        viaNative(client, null, input, List.of(NO_JVM), "exec", "--stdin", ref, "--", "wc", "-l");
    assertThat(direct).as("through the native client").isEqualTo(local);

    Run copied = served("cp", ref + ":/.", "ignored"); // a directory: refused alike
    assertThat(copied).isEqualTo(inProcess("cp", ref + ":/.", "ignored"));

    Files.writeString(work.resolve("there.txt"), "hi");
    Run there = served("cp", "there.txt", ref + ":/there.txt");
    assertThat(there.exitCode()).as(there.err()).isZero();
    Run back = served("cp", ref + ":/there.txt", "back.txt");
    assertThat(back.exitCode()).as(back.err()).isZero();
    assertThat(work.resolve("back.txt")).hasContent("hi");
  }

  @Test
  void withoutAResidentTheCliRunsInProcessAlike() throws Exception {
    String ref = createHostWorkspace();
    String[] args = {"exec", ref, "--", "sh", "-c", "echo out; echo err >&2; exit 5"};
    Run expected = inProcess(args);

    // never started: the client runs it itself (and starts one, for another runtime directory
    // here, so that it does not race the resident this test starts next)
    String runtime = env.get("XDG_RUNTIME_DIR");
    env.put("XDG_RUNTIME_DIR", Files.createDirectories(temp.resolve("run2")).toString());
    assertThat(cli(null, new byte[0], args)).isEqualTo(expected);
    env.put("XDG_RUNTIME_DIR", runtime);

    // killed with kill -9: its socket file is left behind, and nobody answers on it
    Process resident = startResident();
    assertThat(served(args)).isEqualTo(expected);
    resident.destroyForcibly().waitFor();
    assertThat(ResidentClient.socket(env)).exists();
    Run required = served(args);
    assertThat(required.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(required.err()).contains("no resident process served this command");
    assertThat(cli(null, new byte[0], args)).isEqualTo(expected);
  }

  @Test
  void aResidentWhoseJarChangedRefusesAsStaleAndExits() throws Exception {
    Path jar = temp.resolve("extra.jar");
    try (var zip = new java.util.zip.ZipOutputStream(Files.newOutputStream(jar))) {
      zip.putNextEntry(new java.util.zip.ZipEntry("empty"));
    }
    String classPath = System.getProperty("java.class.path") + java.io.File.pathSeparator + jar;
    Path socket = ResidentClient.socket(env);
    ProcessBuilder pb =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED",
                "-D" + ResidentClient.PROPERTY + "=" + socket,
                "-cp",
                classPath,
                Main.class.getName())
            .redirectErrorStream(true);
    pb.environment().clear();
    pb.environment().putAll(env);
    Process resident = pb.start();
    residents.add(resident);
    BufferedReader lines =
        new BufferedReader(
            new InputStreamReader(resident.getInputStream(), StandardCharsets.UTF_8));
    String line;
    while ((line = lines.readLine()) != null && !line.contains("serving on")) {
      // before it listens
    }
    Thread.ofVirtual().start(() -> drain(resident.getInputStream()));
    String code = ResidentClient.codeIdentity(classPath);

    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int served = call(socket, request(code, "--version"), out, new ByteArrayOutputStream());
    assertThat(served).isZero();
    assertThat(out.toString(StandardCharsets.UTF_8)).startsWith("sandbox4j ");

    // another client's code: refused as stale, and the client is told to start a fresh one
    ResidentClient.Call other = new ResidentClient.Call(socket, request(code + "x", "--version"));
    assertThat(other.run(InputStream.nullInputStream(), out, out))
        .isEqualTo(ResidentClient.NOT_SERVED);
    assertThat(other.refusal()).startsWith(Resident.STALE);
    assertThat(other.shouldStart()).isTrue();

    // the jar rebuilt under it: it refuses the very next request and exits
    Files.setLastModifiedTime(jar, FileTime.from(Instant.now().plusSeconds(3600)));
    ResidentClient.Call after = new ResidentClient.Call(socket, request(code, "--version"));
    int refused = after.run(InputStream.nullInputStream(), out, out);
    if (refused != ResidentClient.NOT_SERVED) {
      // its watch saw the change first and it was gone before the request: also never served
      assertThat(after.shouldStart()).isTrue();
    } else {
      assertThat(after.refusal() == null || after.refusal().startsWith(Resident.STALE)).isTrue();
    }
    assertThat(refused).isEqualTo(ResidentClient.NOT_SERVED);
    assertThat(resident.waitFor(60, TimeUnit.SECONDS)).as("the stale resident exits").isTrue();
  }

  @Test
  void cancellingTheClientKillsTheCommandInTheSandbox() throws Exception {
    String ref = createHostWorkspace();
    startResident();
    Path socket = ResidentClient.socket(env);
    CompletableFuture<Long> pid = new CompletableFuture<>();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    ResidentClient.Call call =
        new ResidentClient.Call(
            socket,
            request(
                ResidentClient.codeIdentity(),
                "exec",
                ref,
                "--",
                "sh",
                "-c",
                "echo $$; exec sleep 600"));
    CompletableFuture<Integer> exit =
        CompletableFuture.supplyAsync(
            () -> call.run(InputStream.nullInputStream(), firstLine(pid), err));
    long sleeper = pid.get(60, TimeUnit.SECONDS); // streamed while the command runs
    assertThat(ProcessHandle.of(sleeper)).isPresent();

    assertThat(call.cancel()).isTrue();

    assertThat(exit.get(60, TimeUnit.SECONDS)).as(err::toString).isEqualTo(ExitCodes.INTERRUPTED);
    assertThat(err.toString(StandardCharsets.UTF_8))
        .contains("sandbox4j: interrupted; the command was killed");
    var gone = ProcessHandle.of(sleeper);
    if (gone.isPresent()) {
      gone.get().onExit().get(60, TimeUnit.SECONDS);
    }
  }

  @Test
  void aClientThatVanishesHasItsCommandKilled() throws Exception {
    String ref = createHostWorkspace();
    startResident();
    Path socket = ResidentClient.socket(env);
    try (SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(socket))) {
      Frames.write(
          ch,
          Frames.REQUEST,
          request(
                  ResidentClient.codeIdentity(),
                  "exec",
                  ref,
                  "--",
                  "sh",
                  "-c",
                  "echo $$; exec sleep 600")
              .encode());
      assertThat(Frames.read(ch, Frames.ACCEPT).type()).isEqualTo(Frames.ACCEPT);
      Frames.Frame f;
      do {
        f = Frames.read(ch, Frames.STDOUT, Frames.STDERR);
      } while (f.type() != Frames.STDOUT);
      long sleeper = Long.parseLong(Frames.utf8(f.payload()).strip());
      ch.close(); // as a client killed with kill -9
      var gone = ProcessHandle.of(sleeper);
      if (gone.isPresent()) {
        gone.get().onExit().get(60, TimeUnit.SECONDS);
      }
    }
  }

  @Test
  void aResidentKeepsOneExecHelperPerLocalSandbox() throws Exception {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/crun"))
            || Files.isExecutable(Path.of("/usr/local/bin/crun")),
        "crun (sandbox4j setup)");
    // the engine's own home, where the default image already is
    env.put(
        "SANDBOX4J_HOME",
        Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"));
    startResident();
    Run created = served("--quiet", "create");
    assertThat(created.exitCode()).as(created.err()).isZero();
    String ref = created.out().strip();
    try {
      for (int i = 0; i < 4; i++) {
        Run ran = served("exec", ref, "--", "true");
        assertThat(ran.exitCode()).as(ran.err()).isZero();
      }
      // helpers are the sandbox's processes whose parent is outside it (ppid 0 in its namespace);
      // each command's keeper is a helper's child
      Run ps = served("exec", ref, "--", "ps", "-e", "-o", "ppid=,comm=");
      assertThat(ps.exitCode()).as(ps.err()).isZero();
      List<String> helpers =
          ps.out()
              .lines()
              .map(String::strip)
              .filter(l -> l.startsWith("0 ") && l.endsWith("sandbox4j-execd"))
              .toList();
      assertThat(helpers).as("the sandbox's processes:%n%s", ps.out()).hasSize(1);
    } finally {
      Run rm = served("rm", ref);
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
  }

  // ---- the native client -----------------------------------------------------------------------

  /** A JVM option no JVM knows: a native client that runs the JVM with it fails at once. */
  private static final String NO_JVM = "-XX:+SandboxFourJayNoSuchOption";

  /** The native client, compiled from src/main/c for this test (as ./sandbox4j does). */
  private Path nativeClient() throws Exception {
    boolean ci = "true".equals(System.getenv("CI"));
    boolean cc = Files.isExecutable(Path.of("/usr/bin/cc"));
    if (ci) {
      assertThat(cc).as("CI has a C compiler for the native client").isTrue();
    }
    assumeTrue(cc, "needs /usr/bin/cc to build the native client");
    Path binary = temp.resolve("sandbox4j-client");
    Process p =
        new ProcessBuilder(
                "/usr/bin/cc",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-o",
                binary.toString(),
                Path.of("src/main/c/sandbox4j-client.c").toAbsolutePath().toString())
            .redirectErrorStream(true)
            .start();
    String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor()).as(said).isZero();
    return binary;
  }

  /** Runs {@code args} through the native client, which runs the JVM with {@code jvmOptions}. */
  private Run viaNative(
      Path client, String mode, byte[] stdin, List<String> jvmOptions, String... args)
      throws Exception {
    return process(nativeCommand(client, jvmOptions, args), mode, stdin);
  }

  private static List<String> nativeCommand(Path client, List<String> jvmOptions, String... args) {
    List<String> command = new ArrayList<>();
    command.add(client.toString());
    command.add(System.getProperty("java.home"));
    command.add(System.getProperty("java.class.path"));
    command.addAll(jvmOptions);
    command.add("--");
    command.addAll(List.of(args));
    return command;
  }

  /** The JVM options of {@link #java()}: what the native client runs the JVM with. */
  private List<String> jvmOptions() {
    List<String> all = java();
    return all.subList(1, all.indexOf("-cp"));
  }

  @Test
  void theNativeClientRunsTheJvmWhereNoResidentServes() throws Exception {
    Path client = nativeClient();
    String ref = createHostWorkspace();
    String[] args = {"exec", ref, "--", "sh", "-c", "echo out; echo err >&2; exit 5"};
    Run expected = inProcess(args);

    // no resident (a runtime directory of its own, so that the one it starts stays out of the
    // way): the JVM runs the command, and would start a resident
    String runtime = env.get("XDG_RUNTIME_DIR");
    env.put("XDG_RUNTIME_DIR", Files.createDirectories(temp.resolve("run2")).toString());
    assertThat(viaNative(client, null, new byte[0], jvmOptions(), args)).isEqualTo(expected);
    env.put("XDG_RUNTIME_DIR", runtime);

    // turned off, or a resident that refuses (a command it does not serve): the JVM, every time
    startResident();
    Run off = viaNative(client, "off", new byte[0], List.of(NO_JVM), args);
    assertThat(off.exitCode()).isNotZero();
    assertThat(off.err()).contains("SandboxFourJayNoSuchOption");
    Run refused =
        viaNative(client, null, new byte[0], jvmOptions(), "--debug", "exec", ref, "--", "true");
    assertThat(refused).isEqualTo(inProcess("--debug", "exec", ref, "--", "true"));

    // a resident killed with kill -9 leaves its socket; require makes the JVM say so
    for (Process p : residents) {
      p.destroyForcibly().waitFor();
    }
    Run required = viaNative(client, "require", new byte[0], jvmOptions(), args);
    assertThat(required.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(required.err()).contains("no resident process served this command");
  }

  @Test
  void aSignalToTheNativeClientKillsTheCommandInTheSandbox() throws Exception {
    Path client = nativeClient();
    String ref = createHostWorkspace();
    startResident();
    List<String> command =
        nativeCommand(
            client, List.of(NO_JVM), "exec", ref, "--", "sh", "-c", "echo $$; exec sleep 600");
    ProcessBuilder pb = new ProcessBuilder(command).directory(work.toFile());
    pb.environment().clear();
    pb.environment().putAll(env);
    Process p = pb.start();
    BufferedReader out =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    long sleeper = Long.parseLong(out.readLine().strip()); // streamed while the command runs
    assertThat(ProcessHandle.of(sleeper)).isPresent();

    Process kill = new ProcessBuilder("kill", "-INT", Long.toString(p.pid())).start();
    assertThat(kill.waitFor()).isZero();

    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.exitValue()).as(err).isEqualTo(128 + 2); // as the JVM ends on SIGINT
    assertThat(err).contains("sandbox4j: interrupted; the command was killed");
    var gone = ProcessHandle.of(sleeper);
    if (gone.isPresent()) {
      gone.get().onExit().get(60, TimeUnit.SECONDS);
    }
  }

  @Test
  void theNativeClientSendsWhatTheJavaClientSendsAndChecksEveryFrame() throws Exception {
    Path client = nativeClient();
    Path socket = ResidentClient.socket(env); // the name the native client must arrive at too
    try (var server =
        java.nio.channels.ServerSocketChannel.open(java.net.StandardProtocolFamily.UNIX)) {
      server.bind(UnixDomainSocketAddress.of(socket));
      List<byte[]> answers =
          List.of(
              frame((byte) 'Z', 0, new byte[0]),
              frame(Frames.STDOUT, 1 << 20, new byte[0]),
              frame(Frames.STDIN_WANTED, 4, Frames.i32(0)),
              frame(Frames.STDOUT, 3, Frames.utf8("hi\n")),
              new byte[0]);
      List<String> said =
          List.of(
              "unexpected frame type 90",
              "is 1048576 bytes long; at most 65536",
              "stdin wanted 0 bytes",
              "the resident closed the connection",
              "the resident closed the connection");
      for (int i = 0; i < answers.size(); i++) {
        byte[] answer = answers.get(i);
        CompletableFuture<Frames.Request> sent = new CompletableFuture<>();
        Thread fake =
            Thread.ofPlatform()
                .start(
                    () -> {
                      try (SocketChannel ch = server.accept()) {
                        sent.complete(
                            Frames.Request.decode(Frames.read(ch, Frames.REQUEST).payload()));
                        Frames.write(ch, Frames.ACCEPT, new byte[0]);
                        ch.write(ByteBuffer.wrap(answer));
                      } catch (IOException e) {
                        sent.completeExceptionally(e);
                      }
                    });
        Run run = viaNative(client, null, new byte[0], List.of(NO_JVM), "exec", "x", "--", "true");
        if (!sent.isDone()) {
          server.close(); // it never connected: end the fake's accept rather than wait forever
        }
        fake.join();
        assertThat(sent).as("the native client's request on %s", socket).isCompleted();
        assertThat(run.exitCode()).as(run.err()).isEqualTo(ExitCodes.FAILURE);
        assertThat(run.err())
            .contains("the resident sandbox4j process failed during the command")
            .contains(said.get(i));
        Frames.Request request = sent.get();
        assertThat(request.code()).isEqualTo(ResidentClient.codeIdentity());
        assertThat(request.cwd()).isEqualTo(work.toRealPath().toString());
        assertThat(request.args()).containsExactly("exec", "x", "--", "true");
        assertThat(request.env()).isEqualTo(env);
        assertThat(request.terminal()).isFalse();
      }

      // a refusal: nothing ran, so the JVM runs the command (here it cannot start: NO_JVM)
      var asked = new java.util.concurrent.atomic.AtomicBoolean();
      Thread refusing =
          Thread.ofPlatform()
              .start(
                  () -> {
                    try (SocketChannel ch = server.accept()) {
                      Frames.read(ch, Frames.REQUEST);
                      asked.set(true);
                      Frames.write(ch, Frames.REFUSE, Frames.utf8("not today"));
                    } catch (IOException ignored) {
                      // the client's to notice
                    }
                  });
      Run refused = viaNative(client, null, new byte[0], List.of(NO_JVM), "--version");
      server.close(); // answered by now, or never connected (then the accept ends here)
      refusing.join();
      assertThat(asked).as("the native client asked before running the JVM").isTrue();
      assertThat(refused.exitCode()).isNotZero();
      assertThat(refused.err()).contains("SandboxFourJayNoSuchOption");
    }
  }

  // ---- a resident in this JVM, spoken to over a raw socket -----------------------------------

  private Path startInJvm(Path dir) throws IOException {
    Path socket = dir.resolve("r.sock");
    inJvm = Resident.bind(socket);
    Thread.ofPlatform().daemon().start(inJvm::serve);
    return socket;
  }

  /** What a refusal says, when {@code bytes} are all a client sends. */
  private static String answerTo(Path socket, byte[] bytes) throws IOException {
    try (SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(socket))) {
      ch.write(ByteBuffer.wrap(bytes));
      ch.shutdownOutput();
      Frames.Frame f = Frames.read(ch, Frames.REFUSE);
      return f == null ? null : Frames.utf8(f.payload());
    }
  }

  private static byte[] frame(byte type, int length, byte[] payload) {
    return ByteBuffer.allocate(5 + payload.length).put(type).putInt(length).put(payload).array();
  }

  @Test
  void malformedFramesAreRefusedWithAReasonAndTheResidentServesOn() throws Exception {
    Path socket = startInJvm(temp);

    assertThat(answerTo(socket, frame((byte) 'Z', 0, new byte[0])))
        .contains("unexpected frame type");
    assertThat(answerTo(socket, frame(Frames.REQUEST, Integer.MAX_VALUE, new byte[0])))
        .contains("at most " + Frames.MAX_REQUEST);
    assertThat(answerTo(socket, frame(Frames.REQUEST, -1, new byte[0]))).contains("-1 bytes long");

    // a request that claims a billion arguments in a few bytes
    byte[] code = Frames.utf8("c");
    ByteBuffer lying = ByteBuffer.allocate(64).putInt(Frames.PROTOCOL);
    for (int i = 0; i < 4; i++) {
      lying.putInt(code.length).put(code);
    }
    lying.putInt(0).putInt(1_000_000_000).flip();
    byte[] payload = new byte[lying.remaining()];
    lying.get(payload);
    assertThat(answerTo(socket, frame(Frames.REQUEST, payload.length, payload)))
        .contains("claims 1000000000 arguments");

    // a string longer than the frame
    ByteBuffer longString = ByteBuffer.allocate(8).putInt(Frames.PROTOCOL).putInt(1 << 30);
    assertThat(answerTo(socket, frame(Frames.REQUEST, 8, longString.array())))
        .contains("string of 1073741824 bytes");

    // a frame cut short: the connection ends, nothing else
    assertThat(answerTo(socket, frame(Frames.REQUEST, 100, new byte[10]))).isNull();

    // after all that, a good request is served
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int code0 =
        call(
            socket,
            new Frames.Request(
                Frames.PROTOCOL,
                ResidentClient.codeIdentity(),
                "/",
                "UTF-8",
                "UTF-8",
                false,
                List.of("--version"),
                System.getenv()),
            out,
            new ByteArrayOutputStream());
    assertThat(code0).isZero();
    assertThat(out.toString(StandardCharsets.UTF_8)).startsWith("sandbox4j ");
    assertThat(inJvm.served()).isEqualTo(1);
  }

  @Test
  void anotherUsersConnectionIsClosedUnanswered() throws Exception {
    boolean root = ResidentClient.uid() == 0;
    boolean setpriv = Files.isExecutable(Path.of("/usr/bin/setpriv"));
    if (System.getenv("CI") != null && System.getenv("CI").equals("true")) {
      assertThat(root && setpriv).as("CI runs this as root with setpriv").isTrue();
    }
    assumeTrue(root && setpriv, "needs root and setpriv to connect as another user");

    // a directory others may enter, as a careless setup would leave it: the peer check must hold
    Path dir = Files.createTempDirectory("sandbox4j-peer");
    try {
      Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
      Path socket = startInJvm(dir);
      Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-rw-rw-"));
      Path probe = dir.resolve("Probe.java");
      Files.writeString(
          probe,
          """
          import java.net.UnixDomainSocketAddress;
          import java.nio.ByteBuffer;
          import java.nio.channels.SocketChannel;
          public class Probe {
            public static void main(String[] a) throws Exception {
              try (SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(a[0]))) {
                byte[] p = new byte[] {0, 0, 0, 1};
                ByteBuffer in = ByteBuffer.allocate(1024);
                long total = 0;
                int n;
                try {
                  ch.write(ByteBuffer.allocate(5 + p.length).put((byte) 'Q').putInt(p.length).put(p).flip());
                  while ((n = ch.read(in)) >= 0) { total += n; in.clear(); }
                } catch (java.io.IOException closed) {
                  // closed before our request was written, or with it unread
                }
                System.out.println("connected, read " + total + " bytes");
              }
            }
          }
          """);
      Files.setPosixFilePermissions(probe, PosixFilePermissions.fromString("rw-r--r--"));
      Process p =
          new ProcessBuilder(
                  "/usr/bin/setpriv",
                  "--reuid=65534",
                  "--regid=65534",
                  "--clear-groups",
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  probe.toString(),
                  socket.toString())
              .redirectErrorStream(true)
              .start();
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
      assertThat(output).contains("connected, read 0 bytes");
      assertThat(inJvm.served()).isZero();
    } finally {
      if (inJvm != null) {
        inJvm.close();
        inJvm = null;
      }
      try (var files = Files.list(dir)) {
        for (Path f : files.toList()) {
          Files.deleteIfExists(f);
        }
      }
      Files.deleteIfExists(dir);
    }
  }

  // ---- helpers --------------------------------------------------------------------------------

  private Frames.Request request(String code, String... args) {
    return new Frames.Request(
        Frames.PROTOCOL, code, work.toString(), "UTF-8", "UTF-8", false, List.of(args), env);
  }

  private static int call(Path socket, Frames.Request request, OutputStream out, OutputStream err) {
    return new ResidentClient.Call(socket, request).run(InputStream.nullInputStream(), out, err);
  }

  /** A stdout that completes {@code pid} with the first line written to it. */
  private static OutputStream firstLine(CompletableFuture<Long> pid) {
    return new OutputStream() {
      private final StringBuilder line = new StringBuilder();

      @Override
      public void write(int b) {
        if (b == '\n' && !pid.isDone()) {
          pid.complete(Long.parseLong(line.toString().strip()));
        } else {
          line.append((char) b);
        }
      }
    };
  }
}
