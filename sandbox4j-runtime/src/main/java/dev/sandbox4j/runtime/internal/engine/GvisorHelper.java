package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The host's end of a gVisor sandbox's exec helper: {@code sandbox4j-execd --framed} ({@code
 * src/main/c}), run by one {@code runsc exec} for the sandbox's life, which forks each command
 * inside instead of a {@code runsc exec} per command (one costs 70-120 ms here, a fork a few).
 *
 * <p>No descriptor crosses runsc's boundary, so unlike {@link ExecHelper} the commands' stdin and
 * output travel as frames over the helper's own stdin and stdout: pipes between this JVM and {@code
 * runsc exec}, which hands them to the Sentry. No path names them; inside, only a process allowed
 * to ptrace the helper (root in the sandbox: the same uid, which {@code sandbox} is not) can reach
 * them through {@code /proc/PID/fd}. The command gives up every descriptor of the helper's before
 * it takes on its user.
 *
 * <p>Nothing the helper says is trusted: root in the sandbox can replace, stop or ptrace it. Every
 * frame is checked before it is believed (its type, its length, a command id this JVM issued, no
 * output past the credit this JVM granted), and anything else ends the helper ({@link #lose}) and
 * fails its commands. What it can do by lying is what root in its sandbox can do anyway: report a
 * wrong exit code or output of that sandbox's own commands. This JVM never blocks on it: frames go
 * out through a queue its writer thread drains, replies are read by one thread into buffers bounded
 * by the credit granted, and every wait for an answer has a bound after which the helper is given
 * up and the command's processes are killed the slow way ({@link GvisorExec#killTree}).
 *
 * <p>Thread safety: frames are queued from any thread ({@link #send}); one platform thread reads
 * replies, one writes requests; {@link #commands} is concurrent; each {@link Command}'s buffers are
 * guarded by their own monitors.
 */
final class GvisorHelper implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(GvisorHelper.class.getName());

  static final int MAGIC = 0x53425846;
  static final int VERSION = 1;

  static final int R_START = 1;
  static final int R_STDIN = 2;
  static final int R_STDIN_EOF = 3;
  static final int R_CREDIT = 4;
  static final int R_KILL = 5;
  static final int R_CLOSE = 6;

  static final int A_READY = 16;
  static final int A_STARTED = 17;
  static final int A_FAILED = 18;
  static final int A_OUTPUT = 19;
  static final int A_EOF = 20;
  static final int A_STDIN_ACK = 21;
  static final int A_EXITED = 22;
  static final int A_KILLED = 23;

  /** The largest data of one frame, each way (the helper's bound too). */
  static final int FRAME_DATA = 64 * 1024;

  /** Output the helper may send of each stream before this JVM grants more (its initial credit). */
  static final int CREDIT = 256 * 1024;

  /** stdin bytes sent and not yet acknowledged, at most (the helper buffers up to 1 MiB). */
  static final int STDIN_WINDOW = 256 * 1024;

  /** How long a kill may take before the helper is given up and the slow kill runs. */
  static final Duration KILL_WAIT = Duration.ofSeconds(10);

  /** Stages of a failed start, as the helper numbers them. */
  private static final List<String> STAGES =
      List.of(
          "",
          "fork",
          "setgroups",
          "setgid",
          "setuid",
          "chdir to the working directory",
          "fork the command",
          "protocol");

  private static final long PID_MAX = 4_194_304;

  private final Engine engine;
  private final String id;
  private final Process runsc;
  private final Path log;
  private final Map<Integer, Command> commands = new ConcurrentHashMap<>();
  private final AtomicInteger nextId = new AtomicInteger(1);
  private final CompletableFuture<Void> ready = new CompletableFuture<>();
  private final LinkedBlockingQueue<byte[]> outbox = new LinkedBlockingQueue<>();
  private volatile String lost;

  private GvisorHelper(Engine engine, String id, Process runsc, Path log) {
    this.engine = engine;
    this.id = id;
    this.runsc = runsc;
    this.log = log;
  }

  /** A helper without a process: for a test of {@link #handle} alone. */
  static GvisorHelper forProtocolTest() {
    return new GvisorHelper(null, "test", null, null);
  }

  /** {@code runsc exec} of the helper failed, or what answered was not the framed helper. */
  static final class NotStarted extends IOException {
    NotStarted(String why) {
      super(why);
    }
  }

  /**
   * Starts the helper of gVisor sandbox {@code id} and waits until it said it is ready.
   *
   * @throws NotStarted if it could not start (a sandbox created before the host had the framed
   *     helper: its {@value ExecHelper#IN_SANDBOX} does not know {@code --framed})
   */
  static GvisorHelper start(Engine engine, String id) throws IOException, InterruptedException {
    String name = "execd-" + java.util.UUID.randomUUID();
    Path processFile = engine.commandPidFile(id, name).resolveSibling(name + ".json");
    Path log = processFile.resolveSibling(name + ".log");
    PrivateFiles.writeNew(
        processFile,
        OciConfig.execProcess(
            "0:0",
            "/",
            Map.of("PATH", Engine.BASE_ENV.get("PATH")),
            List.of(ExecHelper.IN_SANDBOX, "--framed")));
    Process runsc;
    try {
      ProcessBuilder pb =
          new ProcessBuilder(engine.runtimeOf(id).gvisorExecArgv(id, processFile, null));
      pb.environment().clear();
      pb.environment().put("PATH", Engine.BASE_ENV.get("PATH"));
      pb.redirectError(log.toFile());
      runsc = pb.start();
    } catch (IOException e) {
      Files.deleteIfExists(processFile);
      throw e;
    }
    GvisorHelper helper = new GvisorHelper(engine, id, runsc, log);
    Thread.ofPlatform()
        .daemon()
        .name("sandbox4j-gvisor-execd-out-" + id)
        .stackSize(256 * 1024)
        .start(helper::readReplies);
    Thread.ofPlatform()
        .daemon()
        .name("sandbox4j-gvisor-execd-in-" + id)
        .stackSize(256 * 1024)
        .start(helper::writeRequests);
    try {
      helper.ready.get(10, TimeUnit.SECONDS);
      return helper;
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      helper.lose("it did not say it was ready");
      helper.runsc.waitFor(2, TimeUnit.SECONDS);
      String said = readQuietly(log);
      helper.close();
      throw new NotStarted(
          "runsc exec of the exec helper did not start it"
              + (runsc.isAlive() ? "" : " (exited " + runsc.exitValue() + ")")
              + (said.isEmpty() ? "" : ": " + said));
    } finally {
      Files.deleteIfExists(processFile); // runsc has read it once the helper runs
    }
  }

  private static String readQuietly(Path log) {
    try {
      byte[] bytes = Files.readAllBytes(log);
      return new String(bytes, 0, Math.min(bytes.length, 4096), StandardCharsets.UTF_8).strip();
    } catch (IOException e) {
      return "";
    }
  }

  /** Why the helper is gone, or null while it serves. */
  String lost() {
    return lost;
  }

  /** Whether it still serves: not given up, and its {@code runsc exec} still runs. */
  boolean serving() {
    return lost == null && runsc.isAlive();
  }

  /** Queues a frame for the helper; the writer thread sends it. */
  private void send(int type, int command, byte[] data, int off, int len) {
    ByteBuffer b = ByteBuffer.allocate(12 + len).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(type).putInt(command).putInt(len).put(data, off, len);
    outbox.add(b.array());
  }

  private void send(int type, int command, int... values) {
    ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int v : values) {
      b.putInt(v);
    }
    send(type, command, b.array(), 0, values.length * 4);
  }

  private static final byte[] STOP = new byte[0];

  private void writeRequests() {
    OutputStream out = runsc.getOutputStream();
    try {
      while (true) {
        byte[] frame = outbox.take();
        if (frame == STOP) {
          break;
        }
        out.write(frame);
        if (outbox.isEmpty()) {
          out.flush();
        }
      }
    } catch (IOException | InterruptedException e) {
      lose("cannot send it a request: " + e.getMessage());
    }
    try {
      out.close(); // its stdin ends: it kills what still runs and exits
    } catch (IOException e) {
      // gone already
    }
  }

  /** The reply loop: one frame at a time, each checked before it is believed. */
  private void readReplies() {
    InputStream in = runsc.getInputStream();
    byte[] header = new byte[12];
    String why;
    try {
      while (true) {
        if (!readFully(in, header)) {
          why = "it ended (killed, or its sandbox stopped)";
          break;
        }
        ByteBuffer h = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN);
        int type = h.getInt();
        int command = h.getInt();
        int len = h.getInt();
        if (len < 0 || len > FRAME_DATA + 4) {
          why = "protocol violation: a frame of " + Integer.toUnsignedString(len) + " bytes";
          break;
        }
        byte[] payload = new byte[len];
        if (!readFully(in, payload)) {
          why = "it ended in the middle of a frame";
          break;
        }
        why = handle(type, command, payload);
        if (why != null) {
          break;
        }
      }
    } catch (IOException | RuntimeException e) {
      why = "reading its replies failed: " + e.getMessage();
    }
    lose(why);
  }

  private static boolean readFully(InputStream in, byte[] buffer) throws IOException {
    int at = 0;
    while (at < buffer.length) {
      int n = in.read(buffer, at, buffer.length - at);
      if (n < 0) {
        return false;
      }
      at += n;
    }
    return true;
  }

  /** Handles one frame; returns why the helper is not to be believed any more, or null. */
  String handle(int type, int command, byte[] payload) {
    ByteBuffer p = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
    if (type == A_READY) {
      if (ready.isDone() || command != 0 || payload.length != 8) {
        return "protocol violation: an unexpected READY";
      }
      if (p.getInt() != MAGIC || p.getInt() != VERSION) {
        return "it is not the framed exec helper of this version";
      }
      ready.complete(null);
      return null;
    }
    if (!ready.isDone()) {
      return "protocol violation: a frame before READY";
    }
    if (command <= 0 || command >= nextId.get()) {
      return "protocol violation: a frame of type " + type + " for command " + command;
    }
    int expected =
        switch (type) {
          case A_STARTED, A_EOF, A_STDIN_ACK -> 4;
          case A_FAILED, A_EXITED -> 8;
          case A_KILLED -> 0;
          case A_OUTPUT -> -1;
          default -> -2;
        };
    if (expected == -2) {
      return "protocol violation: unknown frame type " + Integer.toUnsignedString(type);
    }
    if (expected >= 0 ? payload.length != expected : payload.length < 5) {
      return "protocol violation: a frame of type " + type + " with " + payload.length + " bytes";
    }
    Command c = commands.get(command);
    if (c == null) {
      return null; // a command this JVM is done with: what still comes of it is dropped
    }
    switch (type) {
      case A_STARTED -> {
        int pid = p.getInt();
        if (c.started.isDone() || pid < 2 || pid > PID_MAX) {
          return "protocol violation: STARTED with pid " + Integer.toUnsignedString(pid);
        }
        c.started.complete(pid);
      }
      case A_FAILED -> {
        int errno = p.getInt();
        int stage = p.getInt();
        if (c.exit.isDone() || errno < 0 || errno > 4095 || stage < 1 || stage >= STAGES.size()) {
          return "protocol violation: FAILED with errno " + errno + " at stage " + stage;
        }
        c.failure = new Failure(errno, STAGES.get(stage));
        c.started.complete(-1);
        c.end(-1);
        c.killed.complete(null); // it never ran: nothing to kill
      }
      case A_EXITED -> {
        int code = p.getInt();
        int killed = p.getInt();
        if (!c.started.isDone() || c.exit.isDone() || code < 0 || code > 255 || killed >> 1 != 0) {
          return "protocol violation: EXITED with code " + code + " and flag " + killed;
        }
        c.keeperKilled = killed == 1;
        c.end(code);
        // the keeper is reaped: a kill asked for before has finished (the helper kills the keeper
        // last), and one asked for after finds nothing left. Its KILLED may still follow, but for
        // a command released meanwhile it would be dropped, and the kill would wait KILL_WAIT.
        c.killed.complete(null);
      }
      case A_OUTPUT -> {
        int stream = p.getInt();
        if (stream != 1 && stream != 2) {
          return "protocol violation: output of stream " + stream;
        }
        if (!c.streams[stream - 1].append(payload, 4, payload.length - 4)) {
          return "protocol violation: output past the credit granted";
        }
      }
      case A_EOF -> {
        int stream = p.getInt();
        if (stream != 1 && stream != 2) {
          return "protocol violation: EOF of stream " + stream;
        }
        c.streams[stream - 1].end();
      }
      case A_STDIN_ACK -> {
        if (!c.stdin.ack(p.getInt())) {
          return "protocol violation: more stdin acknowledged than was sent";
        }
      }
      case A_KILLED -> c.killed.complete(null);
      default -> throw new IllegalStateException();
    }
    return null;
  }

  /** Gives the helper up: every command still waiting for an answer fails with {@code why}. */
  void lose(String why) {
    synchronized (this) {
      if (lost != null) {
        return;
      }
      lost = why;
    }
    if (!why.startsWith("it ended") && !why.equals(CLOSED)) {
      LOG.log(
          System.Logger.Level.WARNING,
          "the exec helper of gVisor sandbox local:" + id + " was given up: " + why);
    }
    ready.completeExceptionally(new IOException("the exec helper is gone: " + why));
    outbox.add(STOP); // its stdin ends: it kills the commands still running and exits
    for (Command c : commands.values()) {
      c.lose(why);
    }
    if (runsc != null && !why.startsWith("it ended") && !why.equals(CLOSED)) {
      // one that misbehaves may not read its stdin either
      runsc.destroyForcibly();
    }
  }

  private static final String CLOSED = "the engine closed it";

  /** Ends the helper, which kills the commands still running, and waits (briefly) for its end. */
  @Override
  public void close() {
    lose(CLOSED);
    if (runsc == null) {
      return;
    }
    try {
      if (!runsc.waitFor(2, TimeUnit.SECONDS)) {
        runsc.destroyForcibly();
      }
    } catch (InterruptedException e) {
      runsc.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    try {
      Files.deleteIfExists(log);
    } catch (IOException e) {
      // gone with the sandbox's directory
    }
  }

  /** Why a command did not start: an errno at a stage of the keeper's setup. */
  record Failure(int errno, String stage) {}

  /**
   * Sends a command; the returned command's {@link Command#started} completes with the keeper's pid
   * in the sandbox (-1: it failed to start, see {@link Command#failure}, or the helper is gone).
   */
  Command submit(CommandSpec spec) throws FastExec.HelperGone {
    if (lost != null) {
      throw new FastExec.HelperGone(lost);
    }
    int command = nextId.getAndIncrement();
    byte[] payload = spec.payload(ByteOrder.LITTLE_ENDIAN, spec.uid(), spec.gid());
    Command c = new Command(command);
    commands.put(command, c);
    send(R_START, command, payload, 0, payload.length);
    if (lost != null) { // lost while sending: the reader may have missed this command
      c.lose(lost);
    }
    return c;
  }

  /** Registers command {@code command} as sent: for a protocol test. */
  Command commandForTest(int command) {
    nextId.set(Math.max(nextId.get(), command + 1));
    Command c = new Command(command);
    commands.put(command, c);
    ready.complete(null);
    return c;
  }

  /**
   * One command of the helper, seen as a {@link Process} for {@link
   * dev.sandbox4j.workspace.spi.ProcessCommands#await}: its stdin, its exit, and its two output
   * streams ({@link #stdout}, {@link #stderr}).
   */
  final class Command extends Process {
    final int command;
    final CompletableFuture<Integer> started = new CompletableFuture<>();
    final CompletableFuture<Integer> exit = new CompletableFuture<>();
    final CompletableFuture<Void> killed = new CompletableFuture<>();
    private final Stdin stdin = new Stdin();
    final Output[] streams = {new Output(1), new Output(2)};
    volatile Failure failure;
    volatile String lostWhy;
    volatile boolean keeperKilled;
    private volatile boolean lostWhileRunning;
    private boolean released; // guarded by this

    private Command(int command) {
      this.command = command;
    }

    void end(int code) {
      exit.complete(code);
      stdin.ended();
      maybeRelease();
    }

    void lose(String why) {
      if (!exit.isDone()) {
        lostWhileRunning = true;
      }
      lostWhy = why;
      started.complete(-1);
      end(-1);
      killed.complete(null);
      for (Output o : streams) {
        o.end();
      }
    }

    InputStream stdout() {
      return streams[0];
    }

    InputStream stderr() {
      return streams[1];
    }

    /**
     * Kills the command and every process it started, and returns once the helper says they are
     * gone, or after {@link #KILL_WAIT}: then the helper is given up and the command's processes
     * are killed from a {@code runsc exec} of their own ({@link GvisorExec#killTree}). A command
     * whose keeper has ended has nothing left to kill: what it left in the background runs on, as
     * after any command.
     */
    void killAll() {
      int keeper = started.getNow(-1);
      if (lostWhy == null && !exit.isDone()) {
        send(R_KILL, command);
        // not cut short by an interrupt (a cancellation kills through here): the caller is told
        // the processes are dead only once they are
        boolean interrupted = false;
        long end = System.nanoTime() + KILL_WAIT.toNanos();
        while (true) {
          try {
            killed.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
            break;
          } catch (InterruptedException e) {
            interrupted = true;
          } catch (java.util.concurrent.ExecutionException
              | java.util.concurrent.TimeoutException e) {
            GvisorHelper.this.lose(
                "it did not kill a command within " + KILL_WAIT.toSeconds() + " s");
            break;
          }
        }
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
      if (lostWhileRunning && keeper > 1) {
        GvisorExec.killTree(engine, id, keeper);
      }
    }

    /**
     * Once both streams are closed and its end is known, this JVM is done with the command: the
     * helper drops what still comes of it, and frames for it are dropped here.
     */
    private void maybeRelease() {
      synchronized (this) {
        if (released || !exit.isDone() || !streams[0].isClosed() || !streams[1].isClosed()) {
          return;
        }
        released = true;
      }
      commands.remove(command);
      if (lost == null) {
        send(R_CLOSE, command);
      }
    }

    @Override
    public OutputStream getOutputStream() {
      return stdin;
    }

    @Override
    public InputStream getInputStream() {
      return streams[0];
    }

    @Override
    public InputStream getErrorStream() {
      return streams[1];
    }

    @Override
    public int waitFor() throws InterruptedException {
      try {
        return exit.get();
      } catch (java.util.concurrent.ExecutionException e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    public CompletableFuture<Process> onExit() {
      return exit.thenApply(code -> this);
    }

    @Override
    public int exitValue() {
      Integer code = exit.getNow(null);
      if (code == null) {
        throw new IllegalThreadStateException("the command is running");
      }
      return code;
    }

    @Override
    public void destroy() {
      killAll();
    }

    @Override
    public long pid() {
      return started.getNow(-1);
    }

    /** The command's stdin: frames, at most {@link #STDIN_WINDOW} bytes unacknowledged. */
    final class Stdin extends OutputStream {
      private long unacked; // guarded by this
      private boolean closed; // guarded by this
      private boolean ended; // guarded by this: the command is over

      @Override
      public void write(int b) throws IOException {
        write(new byte[] {(byte) b}, 0, 1);
      }

      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        java.util.Objects.checkFromIndexSize(off, len, b.length);
        while (len > 0) {
          int chunk = Math.min(len, FRAME_DATA);
          synchronized (this) {
            while (!closed && !ended && unacked + chunk > STDIN_WINDOW) {
              try {
                wait();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException();
              }
            }
            if (closed || ended) {
              throw new IOException("the command's stdin is closed");
            }
            unacked += chunk;
          }
          send(R_STDIN, command, b, off, chunk);
          off += chunk;
          len -= chunk;
        }
      }

      synchronized boolean ack(int n) {
        if (n < 0 || n > unacked) {
          return false;
        }
        unacked -= n;
        notifyAll();
        return true;
      }

      synchronized void ended() {
        ended = true;
        notifyAll();
      }

      @Override
      public void close() {
        synchronized (this) {
          if (closed) {
            return;
          }
          closed = true;
          notifyAll();
        }
        if (lost == null) {
          send(R_STDIN_EOF, command);
        }
      }
    }

    /** One output stream: what the helper sent and the reader has not taken, within credit. */
    final class Output extends InputStream {
      private final int stream;
      private final ArrayDeque<byte[]> chunks = new ArrayDeque<>(); // guarded by this
      private int headOffset; // guarded by this
      private long granted = CREDIT; // guarded by this: how much the helper may send in all
      private long received; // guarded by this
      private int consumedSinceGrant; // guarded by this
      private boolean eof; // guarded by this
      private boolean closed; // guarded by this

      Output(int stream) {
        this.stream = stream;
      }

      /** From the reader: false if this is more than was granted. */
      synchronized boolean append(byte[] data, int off, int len) {
        received += len;
        if (received > granted) {
          return false;
        }
        if (!closed && !eof) {
          chunks.add(java.util.Arrays.copyOfRange(data, off, off + len));
          notifyAll();
        }
        return true;
      }

      synchronized void end() {
        eof = true;
        notifyAll();
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
        int n;
        int grant = 0;
        synchronized (this) {
          while (chunks.isEmpty() && !eof && !closed) {
            try {
              wait();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new java.io.InterruptedIOException();
            }
          }
          if (chunks.isEmpty()) {
            return -1;
          }
          byte[] head = chunks.peek();
          n = Math.min(len, head.length - headOffset);
          System.arraycopy(head, headOffset, b, off, n);
          headOffset += n;
          if (headOffset == head.length) {
            chunks.poll();
            headOffset = 0;
          }
          consumedSinceGrant += n;
          if (consumedSinceGrant >= FRAME_DATA && !eof) {
            grant = consumedSinceGrant;
            granted += grant;
            consumedSinceGrant = 0;
          }
        }
        if (grant > 0 && lost == null) {
          send(R_CREDIT, command, stream, grant);
        }
        return n;
      }

      @Override
      public synchronized int available() {
        return chunks.isEmpty() ? 0 : chunks.peek().length - headOffset;
      }

      @Override
      public void close() {
        synchronized (this) {
          closed = true;
          chunks.clear();
          notifyAll();
        }
        maybeRelease();
      }

      synchronized boolean isClosed() {
        return closed;
      }
    }
  }
}
