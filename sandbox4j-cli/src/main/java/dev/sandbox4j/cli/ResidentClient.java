package dev.sandbox4j.cli;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The thin client of the resident CLI process ({@link Resident}): hands a command line it can serve
 * to the resident of this user, code and environment over a unix socket, and relays the command's
 * output, input, exit code and cancellation. It loads nothing of picocli, Jackson or the engine,
 * which is what makes it fast. When there is no resident (never started, killed, stale, refused) it
 * says so and the caller runs the command in-process, which also starts a resident for the next
 * call.
 *
 * <p>Which resident: one per user, class path (and its jars' size, time and inode), Java and
 * environment (all but the shell's {@link #VOLATILE} variables), so the resident's own {@code
 * System.getenv()}, which the engine reads ({@code PATH}, {@code DOCKER_HOST}, ...), is the
 * caller's. Its socket is {@code cli-<hash>.sock} in {@code $XDG_RUNTIME_DIR/sandbox4j}, else in
 * {@code /tmp/sandbox4j-<uid>}: a directory this user owns with mode 0700, or there is no fast
 * path.
 */
final class ResidentClient {

  /** The system property that makes {@link Main} a resident serving on the socket it names. */
  static final String PROPERTY = "sandbox4j.resident";

  /**
   * {@code SANDBOX4J_RESIDENT=off} turns the fast path off: every command runs in-process. {@code
   * =require} is for tests and benchmarks: a command no resident serves fails (exit 70) instead of
   * running in-process, and none is started.
   */
  static final String SWITCH = "SANDBOX4J_RESIDENT";

  /**
   * What {@link #tryServe} and {@link Call#run} return when the resident did not take the command.
   */
  static final int NOT_SERVED = -1;

  /** What {@link #tryServe} returns when a signal is ending the JVM (which then exits by it). */
  static final int SIGNALLED = -2;

  /**
   * Variables that do not choose another resident: those a shell changes from one command to the
   * next, which the CLI never reads, and {@link #SWITCH}, which only the client reads.
   */
  static final Set<String> VOLATILE = Set.of("PWD", "OLDPWD", "_", "SHLVL", SWITCH);

  /** The commands a resident runs: every other one needs a terminal, runs long or is rare. */
  private static final Set<String> SERVED =
      Set.of("exec", "ls", "create", "rm", "cp", "suspend", "resume", "stop", "start");

  /** Options of the top command that take a value. */
  private static final Set<String> GLOBAL_WITH_VALUE = Set.of("--server");

  private static final Set<String> GLOBAL_FLAGS = Set.of("--quiet", "--no-progress");

  private static final Set<String> TOP_ONLY = Set.of("--version", "-V", "--help", "-h");

  /** How long a signal waits for the resident to kill the command, as the in-process CLI does. */
  private static final long KILL_WAIT_SECONDS = 10;

  /** The socket of a resident to start once the in-process run is done; null if none. */
  private static Path toStart;

  private ResidentClient() {}

  /**
   * Starts the resident that the last {@link #tryServe} found missing, if any: called after the
   * command ran in-process, so that the two JVMs do not compete for the CPU during the command.
   */
  static void startIfMissing() {
    Path socket = toStart;
    toStart = null;
    if (socket != null) {
      start(socket);
    }
  }

  /**
   * Whether the resident may run {@code args}: a served command or {@code --version}/{@code
   * --help}, without {@code --debug} (the engine's log is process-wide) or {@code @file} arguments
   * (read relative to the caller) before {@code --}.
   */
  static boolean servable(List<String> args) {
    int i = 0;
    while (i < args.size()) {
      String a = args.get(i);
      if (GLOBAL_FLAGS.contains(a)) {
        i++;
      } else if (GLOBAL_WITH_VALUE.contains(a)) {
        i += 2;
      } else if (a.startsWith("--server=")) {
        i++;
      } else {
        break;
      }
    }
    if (i >= args.size()) {
      return false;
    }
    String first = args.get(i);
    if (TOP_ONLY.contains(first)) {
      return i == args.size() - 1;
    }
    if (!SERVED.contains(first)) {
      return false;
    }
    for (String a : args) {
      if (a.equals("--")) {
        break;
      }
      if (a.startsWith("--debug") || a.startsWith("@")) {
        return false;
      }
    }
    return true;
  }

  /**
   * Serves {@code args} through the resident if it can: its exit code; else {@link #NOT_SERVED}, or
   * {@link #SIGNALLED}.
   */
  static int tryServe(String[] args) {
    Map<String, String> env = System.getenv();
    boolean require = "require".equals(env.get(SWITCH));
    int code = serve(args, env, require);
    if (code == NOT_SERVED && require) {
      System.err.println(
          "sandbox4j: no resident process served this command (" + SWITCH + "=require)");
      return ExitCodes.FAILURE;
    }
    return code;
  }

  private static int serve(String[] args, Map<String, String> env, boolean require) {
    if ("off".equals(env.get(SWITCH)) || !servable(List.of(args))) {
      return NOT_SERVED;
    }
    Path socket;
    String code;
    try {
      code = codeIdentity();
      socket = socket(env, code);
    } catch (IOException | RuntimeException e) {
      return NOT_SERVED; // no private directory, no /proc: no fast path
    }
    if (socket == null) {
      return NOT_SERVED;
    }
    Frames.Request request =
        new Frames.Request(
            Frames.PROTOCOL,
            code,
            Path.of("").toAbsolutePath().toString(),
            encoding("stdout.encoding"),
            encoding("stderr.encoding"),
            terminal(),
            List.of(args),
            env);
    avoidServiceScan();
    Call call = new Call(socket, request);
    Thread onSignal =
        new Thread(
            () -> {
              if (call.cancel()) {
                call.awaitExit(KILL_WAIT_SECONDS);
              }
            },
            "sandbox4j-cancel");
    Runtime.getRuntime().addShutdownHook(onSignal);
    int code2 =
        call.run(
            new FileInputStream(FileDescriptor.in),
            new FileOutputStream(FileDescriptor.out),
            new FileOutputStream(FileDescriptor.err));
    try {
      Runtime.getRuntime().removeShutdownHook(onSignal);
    } catch (IllegalStateException shuttingDown) {
      return SIGNALLED; // the hook waited for the exit frame; System.exit would block
    }
    if (code2 == NOT_SERVED && call.shouldStart() && !require) {
      toStart = socket;
    }
    return code2;
  }

  /**
   * {@link Main#stderrIsTerminal} without {@code System.console()}, whose provider costs the thin
   * client a good part of its time: stdin and stdout are terminals (what {@code Console.isTerminal}
   * tells), and so is stderr.
   */
  static boolean terminal() {
    try {
      return tty(0) && tty(1) && tty(2);
    } catch (IOException | UnsupportedOperationException noProc) {
      return Main.stderrIsTerminal();
    }
  }

  private static boolean tty(int fd) throws IOException {
    String target = Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString();
    return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
  }

  /**
   * Names the platform's own selector provider, which {@code SelectorProvider.provider()} would
   * otherwise look for as a service in every jar on the class path, opening the fat jar (tens of
   * thousands of entries) that the thin client has no other use for. Only on Linux, only if the
   * class is there and nobody chose one: it is the provider the JDK picks there by default.
   */
  private static void avoidServiceScan() {
    String property = "java.nio.channels.spi.SelectorProvider";
    String linux = "sun.nio.ch.EPollSelectorProvider";
    if (System.getProperty(property) != null || !"Linux".equals(System.getProperty("os.name"))) {
      return;
    }
    try {
      Class.forName(linux, false, null);
      System.setProperty(property, linux);
    } catch (ClassNotFoundException | LinkageError another) {
      // another JDK: the service lookup it is
    }
  }

  private static String encoding(String property) {
    String e = System.getProperty(property);
    return e == null ? System.getProperty("native.encoding", "UTF-8") : e;
  }

  /**
   * The socket of this user's resident for this code, Java and environment; null if the private
   * directory cannot be had.
   *
   * <p>The native client ({@code src/main/c/sandbox4j-client.c}) computes the same name from the
   * same facts, so its key is defined in bytes, not in Java's terms: FNV-1a (64 bits) over the
   * UTF-8 of the class path, NUL, {@link #codeIdentity}, NUL, the real path of {@code java.home},
   * NUL, then each {@link #stable} variable as {@code KEY=VALUE} and NUL, sorted by key.
   */
  static Path socket(Map<String, String> env) throws IOException {
    return socket(env, codeIdentity());
  }

  /** {@link #socket(Map)} with this JVM's {@link #codeIdentity} already read. */
  private static Path socket(Map<String, String> env, String codeIdentity) throws IOException {
    Path dir = directory(env);
    if (!privateDirectory(dir, true)) {
      return null;
    }
    return dir.resolve(
        socketName(
            System.getProperty("java.class.path"),
            codeIdentity,
            Path.of(System.getProperty("java.home")).toRealPath().toString(),
            env));
  }

  /** The file name of the socket {@link #socket} describes. */
  static String socketName(
      String classPath, String codeIdentity, String javaHome, Map<String, String> env) {
    StringBuilder key = new StringBuilder();
    key.append(classPath).append('\0');
    key.append(codeIdentity).append('\0');
    key.append(javaHome).append('\0');
    new TreeMap<>(stable(env)).forEach((k, v) -> key.append(k).append('=').append(v).append('\0'));
    return "cli-"
        + Long.toHexString(fnv1a(key.toString().getBytes(StandardCharsets.UTF_8)))
        + ".sock";
  }

  /** {@code env} without the shell's {@link #VOLATILE} variables. */
  static Map<String, String> stable(Map<String, String> env) {
    Map<String, String> copy = new TreeMap<>(env);
    copy.keySet().removeAll(VOLATILE);
    return copy;
  }

  private static Path directory(Map<String, String> env) throws IOException {
    String runtime = env.get("XDG_RUNTIME_DIR");
    if (runtime != null && runtime.startsWith("/")) {
      return Path.of(runtime, "sandbox4j");
    }
    return Path.of(System.getProperty("java.io.tmpdir"), "sandbox4j-" + uid());
  }

  /** This process's user id, as {@code /proc} says. */
  static int uid() throws IOException {
    return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
  }

  /**
   * Whether {@code dir} is a directory (not a link) that this user owns and only it can enter
   * (0700); with {@code create}, one that is missing is made so.
   */
  static boolean privateDirectory(Path dir, boolean create) throws IOException {
    if (create && Files.notExists(dir, LinkOption.NOFOLLOW_LINKS)) {
      try {
        Files.createDirectories(dir.getParent());
        Files.createDirectory(
            dir,
            PosixFilePermissions.asFileAttribute(
                Set.of(
                    PosixFilePermission.OWNER_READ,
                    PosixFilePermission.OWNER_WRITE,
                    PosixFilePermission.OWNER_EXECUTE)));
      } catch (java.nio.file.FileAlreadyExistsException raced) {
        // checked below like any other
      }
    }
    Map<String, Object> a;
    try {
      a = Files.readAttributes(dir, "unix:uid,mode,isDirectory", LinkOption.NOFOLLOW_LINKS);
    } catch (java.nio.file.NoSuchFileException e) {
      return false;
    }
    return Boolean.TRUE.equals(a.get("isDirectory"))
        && ((Integer) a.get("uid")) == uid()
        && (((Integer) a.get("mode")) & 07777) == 0700;
  }

  /**
   * What the code on the class path is: for each entry its absolute path, size, modification time
   * (milliseconds), device and inode, as {@code PATH|SIZE|MTIME|DEV|INO;} in decimal ({@code
   * PATH|missing;} for one that does not exist). A rebuilt or replaced jar changes it. Plain
   * numbers, so that the native client writes the same string from {@code stat(2)}.
   */
  static String codeIdentity() throws IOException {
    return codeIdentity(System.getProperty("java.class.path"));
  }

  /** {@link #codeIdentity()} of another class path. */
  static String codeIdentity(String classPath) throws IOException {
    StringBuilder id = new StringBuilder();
    for (String entry : classPath.split(java.io.File.pathSeparator)) {
      if (entry.isEmpty()) {
        continue;
      }
      Path p = Path.of(entry).toAbsolutePath();
      id.append(p).append('|');
      try {
        Map<String, Object> a = Files.readAttributes(p, "unix:size,lastModifiedTime,dev,ino");
        id.append(a.get("size"))
            .append('|')
            .append(((java.nio.file.attribute.FileTime) a.get("lastModifiedTime")).toMillis())
            .append('|')
            .append(Long.toUnsignedString((Long) a.get("dev")))
            .append('|')
            .append(Long.toUnsignedString((Long) a.get("ino")));
      } catch (java.nio.file.NoSuchFileException gone) {
        id.append("missing");
      }
      id.append(';');
    }
    return id.toString();
  }

  private static long fnv1a(byte[] bytes) {
    long h = 0xcbf29ce484222325L;
    for (byte b : bytes) {
      h ^= b & 0xff;
      h *= 0x100000001b3L;
    }
    return h;
  }

  /**
   * Starts a resident on {@code socket} in a session of its own, from this JVM's class path and
   * Java, with this environment; its output goes to a log beside the socket. Best effort: the
   * command runs in-process whether or not this works.
   */
  static void start(Path socket) {
    try {
      String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      List<String> cp = new ArrayList<>();
      for (String e : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
        if (!e.isEmpty()) {
          cp.add(Path.of(e).toAbsolutePath().toString());
        }
      }
      List<String> command = new ArrayList<>();
      for (String setsid : List.of("/usr/bin/setsid", "/bin/setsid")) {
        if (Files.isExecutable(Path.of(setsid))) {
          command.add(setsid);
          break;
        }
      }
      command.addAll(
          List.of(
              javaBin,
              "--enable-native-access=ALL-UNNAMED",
              "-XX:+UseSerialGC",
              "-D" + PROPERTY + "=" + socket,
              "-cp",
              String.join(java.io.File.pathSeparator, cp),
              Main.class.getName()));
      String name = socket.getFileName().toString();
      Path log =
          socket.resolveSibling(name.substring(0, name.length() - ".sock".length()) + ".log");
      new ProcessBuilder(command)
          .directory(Path.of("/").toFile())
          .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
          .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
          .redirectErrorStream(true)
          .start();
    } catch (IOException | RuntimeException e) {
      // no resident this time; the next call tries again
    }
  }

  /**
   * One command handed to a resident. {@link #run} on one thread; {@link #cancel} from another (a
   * signal's shutdown hook, a test).
   */
  static final class Call {
    private final Path socket;
    private final Frames.Request request;
    private final CountDownLatch exited = new CountDownLatch(1);
    private final Object writeLock = new Object();
    private volatile SocketChannel channel;
    private volatile boolean accepted;
    private volatile boolean start;

    /** The reason of the resident's refusal, if it refused. */
    private volatile String refusal;

    Call(Path socket, Frames.Request request) {
      this.socket = socket;
      this.request = request;
    }

    /**
     * Runs the command through the resident: its exit code, or {@link #NOT_SERVED} if the resident
     * is not there or refused before the command started (then nothing was read or written).
     */
    int run(InputStream in, OutputStream out, OutputStream err) {
      try {
        return relay(in, out, err);
      } finally {
        exited.countDown();
        SocketChannel ch = channel;
        if (ch != null) {
          try {
            ch.close();
          } catch (IOException ignored) {
            // closing
          }
        }
      }
    }

    private int relay(InputStream in, OutputStream out, OutputStream err) {
      SocketChannel ch;
      try {
        ch = SocketChannel.open(UnixDomainSocketAddress.of(socket));
      } catch (IOException | UnsupportedOperationException gone) {
        start = true; // none listens: not started, killed, or gone with its idle time
        return NOT_SERVED;
      }
      channel = ch;
      Frames.Frame answer;
      try {
        synchronized (writeLock) {
          Frames.write(ch, Frames.REQUEST, request.encode());
        }
        answer = Frames.read(ch, Frames.ACCEPT, Frames.REFUSE);
      } catch (IOException e) {
        start = true; // it died while answering, or speaks another protocol
        return NOT_SERVED;
      }
      if (answer == null) {
        start = true;
        return NOT_SERVED;
      }
      if (answer.type() == Frames.REFUSE) {
        refusal = Frames.utf8(answer.payload());
        start = refusal.startsWith(Resident.STALE);
        return NOT_SERVED;
      }
      accepted = true;
      Stdin stdin = new Stdin(in);
      try {
        while (true) {
          Frames.Frame f =
              Frames.read(ch, Frames.STDOUT, Frames.STDERR, Frames.STDIN_WANTED, Frames.EXIT);
          if (f == null) {
            throw new java.io.EOFException("the resident closed the connection");
          }
          switch (f.type()) {
            case Frames.STDOUT -> write(out, f.payload());
            case Frames.STDERR -> write(err, f.payload());
            case Frames.STDIN_WANTED -> {
              int max = Frames.i32(f);
              if (max < 1 || max > Frames.MAX_CHUNK) {
                throw new Frames.BadFrame("stdin wanted " + max + " bytes");
              }
              stdin.want(max);
            }
            default -> {
              return Frames.i32(f);
            }
          }
        }
      } catch (IOException e) {
        // the command ran, so running it again here would run it twice
        try {
          err.write(
              Frames.utf8(
                  "sandbox4j: the resident sandbox4j process failed during the command: "
                      + e.getMessage()
                      + "\n"));
          err.flush();
        } catch (IOException ignored) {
          // nowhere left to say it
        }
        return ExitCodes.FAILURE;
      }
    }

    private static void write(OutputStream stream, byte[] bytes) {
      try {
        stream.write(bytes);
        stream.flush();
      } catch (IOException closed) {
        // as the in-process CLI's PrintStream: a closed stdout does not end the command
      }
    }

    /** Asks the resident to kill the command; false if it is not running there (any more). */
    boolean cancel() {
      SocketChannel ch = channel;
      if (!accepted || ch == null || exited.getCount() == 0) {
        return false;
      }
      try {
        synchronized (writeLock) {
          Frames.write(ch, Frames.CANCEL, new byte[0]);
        }
        return true;
      } catch (IOException gone) {
        return false;
      }
    }

    /** Waits up to {@code seconds} for {@link #run} to return. */
    void awaitExit(long seconds) {
      try {
        exited.await(seconds, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    /** Whether a resident should be started for the next call (none answered, or a stale one). */
    boolean shouldStart() {
      return start;
    }

    /** The resident's reason for refusing, or null. */
    String refusal() {
      return refusal;
    }

    /** Feeds the resident the stdin it asks for, one read at a time, on a thread of its own. */
    private final class Stdin {
      private final InputStream in;
      private final BlockingQueue<Integer> wanted = new ArrayBlockingQueue<>(1);
      private Thread thread;

      Stdin(InputStream in) {
        this.in = in;
      }

      void want(int max) throws Frames.BadFrame {
        if (thread == null) {
          thread = new Thread(this::pump, "sandbox4j-stdin");
          thread.setDaemon(true); // it may block on a terminal past the command's end
          thread.start();
        }
        if (!wanted.offer(max)) {
          throw new Frames.BadFrame("stdin wanted again before the last read was answered");
        }
      }

      private void pump() {
        byte[] buffer = new byte[Frames.MAX_CHUNK];
        try {
          while (true) {
            int max = wanted.take();
            int n;
            try {
              n = in.read(buffer, 0, max);
            } catch (IOException e) {
              n = -1; // as end of input
            }
            synchronized (writeLock) {
              Frames.write(channel, Frames.STDIN, buffer, 0, Math.max(n, 0));
            }
          }
        } catch (InterruptedException | IOException done) {
          // the call ended
        }
      }
    }
  }
}
