package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.internal.util.SandboxHome;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.Charset;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import jdk.net.ExtendedSocketOptions;
import jdk.net.UnixDomainPrincipal;

/**
 * The resident CLI process: a JVM that has loaded picocli, Jackson and the engine once and runs the
 * command lines its thin clients ({@link ResidentClient}) hand it, each in a context made of the
 * client's arguments, environment, working directory, encodings and streams, so that its output,
 * exit code and effects are the in-process CLI's.
 *
 * <p><b>Trust.</b> It serves only its own user: its socket is in a directory only that user can
 * enter (0700), and every connection's peer ({@code SO_PEERCRED}) must be that user, or it is
 * closed unanswered. Every frame it reads is checked ({@link Frames}); a bad one ends that
 * connection with a reason, never the process.
 *
 * <p><b>Refusals.</b> It refuses (and the client runs the command itself) a request of another
 * protocol, of other code than it runs, from another environment than its own (all but the shell's
 * volatile variables), or of a command it does not run ({@link ResidentClient#servable}).
 *
 * <p><b>Lifecycle.</b> One per socket: it holds a lock file beside it for as long as it runs. It
 * exits after {@link #IDLE} without a request, when its socket or its environment's sandbox4j home
 * (if that existed when it started) is deleted, and as soon as the code it runs from changes on
 * disk (a rebuilt or replaced jar), since classes it has not loaded yet would come from the new
 * jar: then it refuses with {@link #STALE} and the client starts a new one. A command being served
 * when it decides to exit runs to its end.
 *
 * <p><b>Threads.</b> The accept loop on the caller's thread; per connection a virtual thread that
 * reads the client's frames, and a platform thread for the command (as the in-process CLI runs it
 * on its main thread), whose interrupt is the cancellation.
 */
final class Resident implements AutoCloseable {

  /** How a refusal for other or changed code begins. */
  static final String STALE = "stale: ";

  /** How long it lives without a request. */
  static final Duration IDLE = Duration.ofMinutes(10);

  private static final Duration LOOK = Duration.ofSeconds(2);

  /** The stderr of the request whose thread (or a thread it started) logs, for the engine's log. */
  private static final InheritableThreadLocal<PrintStream> REQUEST_ERR =
      new InheritableThreadLocal<>();

  private final ServerSocketChannel server;
  private final Path socket;
  private final UserPrincipal self;
  private final String code;
  private final Map<String, String> env;
  private final AtomicInteger active = new AtomicInteger();
  private final AtomicInteger served = new AtomicInteger();
  private final Path home;
  private final boolean homeExisted;
  private volatile long lastUsed = System.nanoTime();
  private volatile boolean stopping;

  private Resident(ServerSocketChannel server, Path socket, UserPrincipal self, String code) {
    this.server = server;
    this.socket = socket;
    this.self = self;
    this.code = code;
    this.env = ResidentClient.stable(System.getenv());
    this.home = Main.home(System.getenv(), System.getProperty("user.home"), SandboxHome.isRoot());
    this.homeExisted = Files.isDirectory(home);
  }

  /**
   * Binds {@code socket} (replacing a file left there) for this user, the code on this JVM's class
   * path and its environment. Its directory is the caller's to secure.
   */
  static Resident bind(Path socket) throws IOException {
    Files.deleteIfExists(socket);
    ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
    try {
      server.bind(UnixDomainSocketAddress.of(socket));
      Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
      return new Resident(
          server, socket, Files.getOwner(Path.of("/proc/self")), ResidentClient.codeIdentity());
    } catch (IOException | RuntimeException e) {
      server.close();
      throw e;
    }
  }

  /** {@code -Dsandbox4j.resident=SOCKET}: serves on SOCKET until idle or stale. */
  static void main(Path socket) {
    Path dir = socket.getParent();
    String name = socket.getFileName().toString();
    try {
      if (!ResidentClient.privateDirectory(dir, false)) {
        say("not serving: " + dir + " is not a directory of this user's with mode 0700");
        return;
      }
      try (FileChannel lockFile =
              FileChannel.open(
                  dir.resolve(name + ".lock"),
                  StandardOpenOption.CREATE,
                  StandardOpenOption.WRITE);
          FileLock lock = lockFile.tryLock()) {
        if (lock == null) {
          return; // another one serves this socket
        }
        routeEngineLog();
        Providers.shareDefaultLocal();
        try (Resident resident = bind(socket)) {
          say("serving on " + socket);
          Thread.ofPlatform().daemon().name("sandbox4j-warmup").start(Resident::warmUp);
          Thread.ofPlatform().daemon().name("sandbox4j-watch").start(resident::watch);
          resident.serve();
          resident.awaitIdle();
        }
        // Gone for good: leave nothing behind. The lock file goes while still held, so that a
        // resident started meanwhile either fails its lock or makes a new file (and one that
        // locked the old file after all loses its socket to the next, and exits).
        String base = name.endsWith(".sock") ? name.substring(0, name.length() - 5) : name;
        Files.deleteIfExists(dir.resolve(name + ".lock"));
        Files.deleteIfExists(dir.resolve(base + ".log"));
      }
    } catch (IOException | RuntimeException e) {
      say("failed: " + e);
    }
  }

  /** Accepts and serves connections until {@link #close}. */
  void serve() {
    while (!stopping) {
      SocketChannel ch;
      try {
        ch = server.accept();
      } catch (ClosedChannelException closed) {
        return;
      } catch (IOException e) {
        say("accept failed: " + e);
        continue;
      }
      Thread.ofVirtual().name("sandbox4j-connection").start(() -> handle(ch));
    }
  }

  /** How many commands it ran; for tests. */
  int served() {
    return served.get();
  }

  /** Stops accepting and removes its socket; commands being served run to their end. */
  @Override
  public void close() {
    stopping = true;
    try {
      server.close();
    } catch (IOException ignored) {
      // closing
    }
    try {
      Files.deleteIfExists(socket);
    } catch (IOException ignored) {
      // a later resident replaces it
    }
  }

  private void stop(String why) {
    if (!stopping) {
      say("exits: " + why);
    }
    close();
  }

  private void awaitIdle() {
    synchronized (active) {
      while (active.get() > 0) {
        try {
          active.wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  /** Ends it once idle for {@link #IDLE}, or as soon as its code changed on disk. */
  private void watch() {
    while (!stopping) {
      try {
        Thread.sleep(LOOK);
      } catch (InterruptedException e) {
        return;
      }
      if (!stale().isEmpty()) {
        stop("its code changed on disk");
      } else if (!Files.exists(socket, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        stop("its socket was deleted"); // with its directory, say: nobody can reach it
      } else if (homeExisted && !Files.isDirectory(home)) {
        stop("its home " + home + " was deleted"); // a temporary one: nothing left to serve
      } else if (active.get() == 0 && System.nanoTime() - lastUsed > IDLE.toNanos()) {
        stop("idle for " + IDLE.toMinutes() + " minutes");
      }
    }
  }

  /** Why the code it runs is not the code on disk any more; empty if it is. */
  private String stale() {
    try {
      return ResidentClient.codeIdentity().equals(code) ? "" : "its jars changed on disk";
    } catch (IOException e) {
      return "its jars cannot be read: " + e.getMessage();
    }
  }

  private void handle(SocketChannel ch) {
    try (ch) {
      UnixDomainPrincipal peer = ch.getOption(ExtendedSocketOptions.SO_PEERCRED);
      if (!self.equals(peer.user())) {
        say("refused a connection of user " + peer.user().getName() + ": it serves only " + self);
        return; // not a word to another user
      }
      Frames.Request request;
      try {
        Frames.Frame f = Frames.read(ch, Frames.REQUEST);
        if (f == null) {
          return;
        }
        request = Frames.Request.decode(f.payload());
      } catch (Frames.BadFrame bad) {
        refuse(ch, "malformed request: " + bad.getMessage());
        return;
      }
      String why = refusal(request);
      if (why != null) {
        refuse(ch, why);
        if (why.startsWith(STALE) && !stale().isEmpty()) {
          stop("its code changed on disk");
        }
        return;
      }
      active.incrementAndGet();
      try {
        run(ch, request);
      } finally {
        lastUsed = System.nanoTime();
        synchronized (active) {
          active.decrementAndGet();
          active.notifyAll();
        }
      }
    } catch (IOException | RuntimeException e) {
      say("a connection failed: " + e);
    }
  }

  private static void refuse(SocketChannel ch, String why) throws IOException {
    byte[] reason = Frames.utf8(why);
    Frames.write(ch, Frames.REFUSE, reason, 0, Math.min(reason.length, Frames.MAX_REASON));
  }

  /** Why it does not run {@code request}; null if it does. */
  private String refusal(Frames.Request request) {
    if (request.protocol() != Frames.PROTOCOL) {
      return "protocol " + request.protocol() + "; this one speaks " + Frames.PROTOCOL;
    }
    if (!request.code().equals(code)) {
      return STALE + "the client runs other code than this resident";
    }
    String stale = stale();
    if (!stale.isEmpty()) {
      return STALE + stale;
    }
    if (!ResidentClient.stable(request.env()).equals(env)) {
      return "the client's environment is not this resident's";
    }
    if (!ResidentClient.servable(request.args())) {
      return "not a command a resident runs";
    }
    if (!request.cwd().startsWith("/")) {
      return "the working directory is not absolute";
    }
    for (String encoding : List.of(request.stdoutEncoding(), request.stderrEncoding())) {
      try {
        if (!Charset.isSupported(encoding)) {
          return "unknown encoding " + encoding;
        }
      } catch (IllegalArgumentException illegal) {
        return "illegal encoding name";
      }
    }
    return null;
  }

  private void run(SocketChannel ch, Frames.Request request) throws IOException {
    Frames.write(ch, Frames.ACCEPT, new byte[0]);
    Sender sender = new Sender(ch);
    PrintStream out =
        new PrintStream(
            new BufferedOutputStream(new FrameOut(sender, Frames.STDOUT), 8192),
            true,
            Charset.forName(request.stdoutEncoding()));
    PrintStream err =
        new PrintStream(
            new BufferedOutputStream(new FrameOut(sender, Frames.STDERR), 8192),
            true,
            Charset.forName(request.stderrEncoding()));
    RemoteStdin in = new RemoteStdin(sender);
    CliContext context =
        new CliContext(
            Main.home(request.env(), System.getProperty("user.home"), SandboxHome.isRoot()),
            in,
            out,
            err,
            request.env(),
            request.terminal(),
            Path.of(request.cwd()));
    String[] args = request.args().toArray(String[]::new);
    int[] code = {ExitCodes.FAILURE};
    Thread worker =
        Thread.ofPlatform()
            .name("sandbox4j-command")
            .unstarted(
                () -> {
                  REQUEST_ERR.set(err);
                  code[0] = Cli.run(context, args);
                });
    Thread reader =
        Thread.ofVirtual().name("sandbox4j-client").unstarted(() -> readClient(ch, in, worker));
    worker.start();
    reader.start();
    try {
      worker.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    served.incrementAndGet();
    out.flush();
    err.flush();
    in.end();
    sender.send(Frames.EXIT, Frames.i32(code[0]));
    sender.finish();
  }

  /** Reads stdin and cancellation until the connection ends; a cancel or an end kills the run. */
  private static void readClient(SocketChannel ch, RemoteStdin in, Thread worker) {
    try {
      while (true) {
        Frames.Frame f = Frames.read(ch, Frames.STDIN, Frames.CANCEL);
        if (f == null) {
          break; // the client is gone: as its Ctrl-C
        }
        if (f.type() == Frames.CANCEL) {
          worker.interrupt();
        } else {
          in.answer(f.payload());
        }
      }
    } catch (IOException e) {
      // a bad frame or a broken connection: the client cannot follow the command any more
    }
    if (worker.isAlive()) {
      worker.interrupt();
    }
    in.end();
  }

  private static void warmUp() {
    try {
      PrintStream nowhere = new PrintStream(OutputStream.nullOutputStream());
      CliContext context =
          new CliContext(
              Path.of("/nonexistent-sandbox4j-home"),
              InputStream.nullInputStream(),
              nowhere,
              nowhere);
      Cli.run(context, "--version");
      for (String command : List.of("exec", "ls", "create", "rm", "cp")) {
        Cli.run(context, command, "--help");
      }
    } catch (RuntimeException ignored) {
      // only a head start
    }
  }

  /**
   * Sends the engine's log (warnings, or more with a level someone set) to the stderr of the
   * request that logged it, as the in-process CLI's console handler does; other records to this
   * process's log.
   */
  private static void routeEngineLog() {
    Cli.ENGINE_LOG.setLevel(Level.WARNING);
    Logger root = Logger.getLogger("");
    for (Handler h : root.getHandlers()) {
      root.removeHandler(h);
    }
    Handler routing =
        new Handler() {
          @Override
          public void publish(LogRecord record) {
            if (!isLoggable(record)) {
              return;
            }
            PrintStream target = REQUEST_ERR.get();
            String text = getFormatter().format(record);
            (target != null ? target : System.err).print(text);
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    routing.setFormatter(new SimpleFormatter());
    routing.setLevel(Level.INFO);
    root.addHandler(routing);
  }

  private static void say(String line) {
    System.err.println(
        Instant.now() + " sandbox4j resident " + ProcessHandle.current().pid() + " " + line);
  }

  /**
   * The one writer of a connection's frames after {@link Frames#ACCEPT}. The command's threads
   * never write to the channel themselves: an interrupt (the cancellation) of a thread in a channel
   * operation closes the channel, which would lose the command's last words and its exit code.
   * Bounded, so a client that reads slowly slows the command down, as a pipe does.
   */
  private static final class Sender {
    private static final Frames.Frame END = new Frames.Frame((byte) 0, new byte[0]);

    private final SocketChannel ch;
    private final BlockingQueue<Frames.Frame> queue = new ArrayBlockingQueue<>(16);
    private final Thread thread;
    private volatile boolean broken;

    Sender(SocketChannel ch) {
      this.ch = ch;
      this.thread = Thread.ofVirtual().name("sandbox4j-send").start(this::loop);
    }

    /** Queues a frame; dropped once the client cannot be written to. Never interrupted. */
    void send(byte type, byte[] payload) {
      if (!broken) {
        put(new Frames.Frame(type, payload));
      }
    }

    /** Sends what is queued and ends. */
    void finish() {
      put(END);
      boolean interrupted = false;
      while (true) {
        try {
          thread.join();
          break;
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }

    private void put(Frames.Frame frame) {
      boolean interrupted = false;
      while (true) {
        try {
          queue.put(frame);
          break;
        } catch (InterruptedException e) {
          interrupted = true; // the cancellation: its message still has to go out
        }
      }
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }

    private void loop() {
      while (true) {
        Frames.Frame f;
        try {
          f = queue.take();
        } catch (InterruptedException e) {
          return;
        }
        if (f == END) {
          return;
        }
        if (!broken) {
          try {
            Frames.write(ch, f.type(), f.payload());
          } catch (IOException gone) {
            broken = true; // keep taking, so that no sender blocks
          }
        }
      }
    }
  }

  /** One stream of the command's output as frames of its type. */
  private static final class FrameOut extends OutputStream {
    private final Sender sender;
    private final byte type;

    FrameOut(Sender sender, byte type) {
      this.sender = sender;
      this.type = type;
    }

    @Override
    public void write(int b) {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) {
      java.util.Objects.checkFromIndexSize(off, len, b.length);
      while (len > 0) {
        int n = Math.min(len, Frames.MAX_CHUNK);
        sender.send(type, java.util.Arrays.copyOfRange(b, off, off + n));
        off += n;
        len -= n;
      }
    }
  }

  /** The client's stdin, read only when the command reads it, one bounded chunk per read. */
  private static final class RemoteStdin extends InputStream {
    private static final byte[] END = new byte[0];

    private final Sender sender;
    private final BlockingQueue<byte[]> answers = new ArrayBlockingQueue<>(2);
    private int asked; // guarded by this; 0 if no read waits
    private boolean ended; // guarded by this

    RemoteStdin(Sender sender) {
      this.sender = sender;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      java.util.Objects.checkFromIndexSize(off, len, b.length);
      if (len == 0) {
        return 0;
      }
      int want;
      synchronized (this) {
        if (ended) {
          return -1;
        }
        want = Math.min(len, Frames.MAX_CHUNK);
        asked = want;
      }
      sender.send(Frames.STDIN_WANTED, Frames.i32(want));
      byte[] got;
      try {
        got = answers.take();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new InterruptedIOException("interrupted while waiting for stdin");
      }
      synchronized (this) {
        asked = 0;
        if (got == END || got.length == 0) {
          ended = true;
          return -1;
        }
      }
      System.arraycopy(got, 0, b, off, got.length);
      return got.length;
    }

    /** The client's answer to the read that waits; a bad frame if none waits or it is too big. */
    void answer(byte[] data) throws Frames.BadFrame {
      synchronized (this) {
        if (asked == 0) {
          throw new Frames.BadFrame("stdin that was not asked for");
        }
        if (data.length > asked) {
          throw new Frames.BadFrame(data.length + " bytes of stdin; " + asked + " were asked for");
        }
        asked = 0;
      }
      answers.offer(data);
    }

    /** No more input: a read that waits, and every later one, sees the end. */
    void end() {
      synchronized (this) {
        ended = true;
      }
      answers.offer(END);
    }

    @Override
    public void close() {
      end();
    }
  }
}
