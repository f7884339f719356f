package dev.sandbox4j.runtime.internal.engine;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The host's end of one sandbox's exec helper ({@code sandbox4j-execd}, {@code src/main/c}): a
 * small resident process inside the sandbox that forks commands on request, so that a command costs
 * a fork and a few messages instead of a whole {@code crun exec}.
 *
 * <p>Started with {@code crun exec -d} like any command (so it has the container's namespaces,
 * seccomp filter, capabilities, rlimits and v1 cgroups; it lives in a v2 cgroup of its own), with
 * its stdin and stdout one end of a unix socket pair that this JVM made: no path in any file
 * system, nothing the sandbox can name, replace or connect to. It ends when this end closes (this
 * JVM exits or {@link #close}s it).
 *
 * <p>Everything it says is validated and nothing it says is trusted: code in the sandbox is root
 * there and can kill, replace or ptrace it. Messages are 16 bytes, so no size from it is ever
 * allocated; an unknown type, a request id that is not pending, or a value out of range ends the
 * helper ({@link #lost}) and fails its pending commands. The pid it reports is only a key: the host
 * process it moves into a command's cgroup is one that the kernel lists in the helper's own cgroup
 * and whose pid in the sandbox's namespace is that key ({@link #moveInto}), so a lying helper can
 * at most move one of its sandbox's own processes between that sandbox's cgroups.
 *
 * <p>Thread safety: requests are sent under {@link #sendLock}; one platform thread reads replies;
 * {@link #pending} is concurrent.
 */
final class ExecHelper implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(ExecHelper.class.getName());

  /** Where the helper appears in a sandbox (bind-mounted read-only, as the init). */
  static final String IN_SANDBOX = "/dev/sandbox4j-execd";

  private static final int MAGIC = 0x53425831;
  private static final int MAGIC_CLAIM = 0x53425843;
  private static final int STARTED = 1;
  private static final int FAILED = 2;
  private static final int EXITED = 3;
  private static final int READY = 4;
  private static final int SPARE = 5;

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
          "protocol",
          "claim its spare keeper");

  /** {@link #STAGES}' index of a claim of a spare that is gone: nothing ran. */
  private static final int STAGE_SPARE = 8;

  /** The largest pid Linux gives ({@code PID_MAX_LIMIT}). */
  private static final long PID_MAX = 4_194_304;

  private final Engine engine;
  private final String id;
  final String group;
  private final int socket;
  private final Object sendLock = new Object();
  private final Map<Integer, Pending> pending = new ConcurrentHashMap<>();
  private final AtomicInteger nextRequest = new AtomicInteger(1);
  private final CompletableFuture<Void> ready = new CompletableFuture<>();
  private volatile String lost;
  private volatile boolean readerStarted;
  private volatile int version; // READY's; set before ready completes
  private final java.util.concurrent.atomic.AtomicReference<Spare> spare =
      new java.util.concurrent.atomic.AtomicReference<>();
  private int lastSpare; // the reader thread's: the last SPARE's sequence number
  private final Object spareLock = new Object();

  /**
   * A spare keeper (version 3): a process the helper forked ahead, which this JVM moved into
   * command cgroup {@code group} of its own before it is ever given a command ({@link #claim}).
   */
  record Spare(int seq, int nsPid, long hostPid, String group) {}

  /** Moves spares into their cgroups, off the reader thread and off every command's path. */
  private static final java.util.concurrent.ExecutorService SPARES =
      java.util.concurrent.Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "sandbox4j-exec-spares");
            t.setDaemon(true);
            return t;
          });

  private boolean socketClosed; // guarded by sendLock

  /** One request: its start (the pid in the sandbox), then its end. */
  static final class Pending {
    final CompletableFuture<Integer> started = new CompletableFuture<>();
    final CompletableFuture<Outcome> ended = new CompletableFuture<>();
    final boolean claim;

    Pending(boolean claim) {
      this.claim = claim;
    }
  }

  /**
   * How a command ended: its exit code; or a failure to start ({@code errno}, {@code stage}); or
   * the helper's loss ({@code lost} not null).
   */
  record Outcome(int exit, int errno, String stage, String lost) {
    boolean failedToStart() {
      return stage != null;
    }

    /** A claim of a spare that was gone: nothing ran, and the command may start the usual way. */
    boolean spareGone() {
      return STAGES.get(STAGE_SPARE).equals(stage);
    }
  }

  /** A helper without a process or socket: for a test of {@link #handle} alone. */
  static ExecHelper forProtocolTest() {
    return new ExecHelper(null, "test", "test", -1);
  }

  private ExecHelper(Engine engine, String id, String group, int socket) {
    this.engine = engine;
    this.id = id;
    this.group = group;
    this.socket = socket;
  }

  /** Whether this host can run the helper at all: native calls, the binary and cgroup v2. */
  static boolean supported() {
    return HelperCalls.AVAILABLE && dev.sandbox4j.runtime.internal.oci.OciConfig.hasExecHelper();
  }

  /**
   * Starts the helper of sandbox {@code id}.
   *
   * @throws NotStarted if {@code crun exec} failed (its message says why: a sandbox created before
   *     the host had the helper has no {@value #IN_SANDBOX})
   */
  static ExecHelper start(Engine engine, String id, List<String> host) throws IOException {
    String group = engine.cgroups().newCommandGroup(id);
    int[] pair = HelperCalls.socketPair();
    ExecHelper helper = new ExecHelper(engine, id, group, pair[0]);
    Path log = engine.dir(id).resolve(group + ".log");
    try {
      List<String> argv = new ArrayList<>(host);
      // --spares: this engine takes SPARE replies (an older helper ignores the argument)
      argv.addAll(engine.runtime().helperArgv(id, group, IN_SANDBOX, "--spares"));
      int pid =
          HelperCalls.spawn(
              argv, List.of("PATH=" + Engine.BASE_ENV.get("PATH")), pair[1], log.toString());
      HelperCalls.close(pair[1]);
      pair[1] = -1;
      int exit = HelperCalls.waitFor(pid); // crun exec -d returns once the helper runs
      String said = readQuietly(log);
      if (exit != 0) {
        throw new NotStarted(exit, said);
      }
      Thread.ofPlatform()
          .daemon()
          .name("sandbox4j-execd-" + id)
          .stackSize(256 * 1024)
          .start(helper::readReplies);
      helper.readerStarted = true;
      Running.add(helper);
      return helper;
    } catch (IOException | RuntimeException e) {
      HelperCalls.close(pair[1]);
      helper.close();
      throw e;
    } finally {
      try {
        Files.deleteIfExists(log);
      } catch (IOException e) {
        // the sandbox's directory goes with its destroy
      }
    }
  }

  /**
   * The helpers this JVM runs, closed when it exits: a helper would exit by itself when its socket
   * closes with the JVM, but its cgroup would stay behind in the sandbox (one per process that ran
   * a command: every in-process CLI call). A JVM killed with {@code kill -9} still leaves it, for
   * the sandbox's destroy. Held weakly: a helper whose engine was dropped is closed, as before,
   * when the garbage collector closes its socket; this set must not keep it (and its process in the
   * sandbox) alive for the JVM's life.
   */
  private static final class Running {
    private static final java.util.Set<ExecHelper> HELPERS =
        java.util.Collections.synchronizedSet(
            java.util.Collections.newSetFromMap(new java.util.WeakHashMap<>()));

    static {
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> {
                    List<ExecHelper> left;
                    synchronized (HELPERS) {
                      left = List.copyOf(HELPERS);
                    }
                    left.forEach(ExecHelper::closeAtExit);
                  },
                  "sandbox4j-exec-helpers-exit"));
    }

    static void add(ExecHelper helper) {
      HELPERS.add(helper);
    }

    static void remove(ExecHelper helper) {
      HELPERS.remove(helper);
    }
  }

  /** {@code crun exec} of the helper failed. */
  static final class NotStarted extends IOException {
    final int exit;
    final String said;

    NotStarted(int exit, String said) {
      super("crun exec of the exec helper exited " + exit + (said.isEmpty() ? "" : ": " + said));
      this.exit = exit;
      this.said = said;
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

  /** Waits until the helper said it is ready, at most {@code millis}. */
  void awaitReady(long millis) throws IOException, InterruptedException {
    try {
      ready.get(millis, java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IOException(e.getCause().getMessage(), e.getCause());
    } catch (java.util.concurrent.TimeoutException e) {
      lose("it did not say it was ready within " + millis + " ms");
      throw new IOException("the exec helper of sandbox local:" + id + " did not start");
    }
  }

  /**
   * Whether the helper runs a command's argv as {@code sh -c 'exec "$@"'} would, without the shell
   * (version 2 on); a helper of version 1 (bind-mounted into a sandbox made before the host's
   * helper was rebuilt) runs {@code argv[0]} as a path, so the engine wraps argv in that shell
   * ({@link Exec#inside}). Known once ready.
   */
  boolean runsArgvAsShell() {
    return version >= 2;
  }

  /** Why the helper is gone, or null while it serves. */
  String lost() {
    return lost;
  }

  /**
   * Asks the helper to start a command: it forks a process that waits on {@code fds[3]} (the read
   * end of the "go" pipe) before it runs anything.
   *
   * @param fds the command's stdin, stdout, stderr and the go pipe's read end; this JVM's copies
   *     stay open (the caller closes them)
   */
  Pending submit(int[] fds, CommandSpec command) throws IOException {
    return send(MAGIC, null, fds, command);
  }

  /**
   * Hands a command to spare keeper {@code spare} (from {@link #takeSpare}): it runs at once, in
   * the spare's cgroup. If the spare is gone (killed from inside, or given up idle), the request
   * ends with {@link Outcome#spareGone} and nothing ran.
   *
   * @param fds the command's stdin, stdout and stderr; this JVM's copies stay open
   */
  Pending claim(Spare spare, int[] fds, CommandSpec command) throws IOException {
    return send(MAGIC_CLAIM, spare, fds, command);
  }

  private Pending send(int magic, Spare claimed, int[] fds, CommandSpec command)
      throws IOException {
    if (lost != null) {
      throw new FastExec.HelperGone(lost);
    }
    int request = nextRequest.getAndIncrement();
    byte[] payload =
        claimed == null
            ? command.payload(ByteOrder.nativeOrder(), request, command.uid(), command.gid())
            : command.payload(
                ByteOrder.nativeOrder(), claimed.seq(), request, command.uid(), command.gid());
    Pending p = new Pending(claimed != null);
    pending.put(request, p);
    ByteBuffer header = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
    header.putInt(magic).putInt(payload.length);
    try {
      synchronized (sendLock) {
        if (socketClosed) {
          throw new FastExec.HelperGone("its socket is closed");
        }
        HelperCalls.sendWithFds(socket, header.array(), fds);
        HelperCalls.writeFully(socket, payload);
      }
    } catch (IOException e) {
      pending.remove(request);
      lose("cannot send it a request: " + e.getMessage());
      throw e instanceof FastExec.HelperGone ? e : new FastExec.HelperGone(lost);
    }
    if (lost != null) { // lost while sending: the reader may have missed this request
      fail(p, lost);
    }
    return p;
  }

  /** The spare keeper moved into its cgroup, now this caller's alone; null if there is none. */
  Spare takeSpare() {
    return spare.getAndSet(null);
  }

  /**
   * Moves spare {@code seq} (pid {@code nsPid} in the sandbox) into a new command cgroup; from then
   * on {@link #takeSpare} gives it out. A spare that cannot be moved (it was killed) is not used.
   */
  private void prepare(int seq, int nsPid) {
    synchronized (spareLock) { // lose() takes the spare under it: one of the two discards it
      if (lost == null) {
        prepareLocked(seq, nsPid);
      }
    }
  }

  private void prepareLocked(int seq, int nsPid) {
    String group;
    try {
      group = engine.cgroups().newCommandGroup(id);
    } catch (RuntimeException sandboxGone) {
      return;
    }
    long hostPid;
    try {
      hostPid = moveInto(nsPid, group);
    } catch (IOException | RuntimeException e) {
      discard(group);
      return;
    }
    Spare s = new Spare(seq, nsPid, hostPid, group);
    Spare before = spare.getAndSet(s);
    if (before != null) {
      discard(before.group()); // the helper gave it up (idle) and made this one
    }
  }

  private void discard(String spareGroup) {
    engine.cgroups().killCommand(id, spareGroup);
    engine.cgroups().removeKilledCommandGroup(id, spareGroup);
  }

  /** Registers request {@code request} as pending without sending it: for a protocol test. */
  Pending pendingForTest(int request) {
    return pendingForTest(request, false);
  }

  /** {@link #pendingForTest}, as a {@link #claim} ({@code claim} true) or not. */
  Pending pendingForTest(int request, boolean claim) {
    Pending p = new Pending(claim);
    pending.put(request, p);
    return p;
  }

  /** The reply loop: one 16-byte message at a time, each checked before it is believed. */
  private void readReplies() {
    byte[] message = new byte[16];
    String why;
    try {
      while (true) {
        if (!HelperCalls.readFully(socket, message)) {
          why = "it ended (killed, or its sandbox stopped)";
          break;
        }
        ByteBuffer m = ByteBuffer.wrap(message).order(ByteOrder.nativeOrder());
        why = handle(m.getInt(), m.getInt(), m.getInt(), m.getInt());
        if (why != null) {
          break;
        }
      }
    } catch (IOException | RuntimeException e) {
      why = "reading its replies failed: " + e.getMessage();
    }
    lose(why);
    closeSocket(); // this thread was its only reader
  }

  /** Closes the socket under the send lock, so no send can reach a reused descriptor number. */
  private void closeSocket() {
    synchronized (sendLock) {
      if (!socketClosed) {
        socketClosed = true;
        HelperCalls.close(socket);
      }
    }
  }

  /** Handles one reply; returns why the helper is not to be believed any more, or null. */
  String handle(int type, int request, int a, int b) {
    if (type == READY) {
      // a newer helper (a sandbox made after the host's was rebuilt by a newer setup) serves this
      // engine's requests as its own version does: features go by version, and nothing it sends
      // unasked (SPARE only to an engine that passed --spares)
      if (ready.isDone() || request != 0 || a < 1) {
        return "protocol violation: an unexpected READY";
      }
      version = a;
      ready.complete(null);
      return null;
    }
    if (!ready.isDone()) {
      return "protocol violation: a reply before READY";
    }
    if (type == SPARE) {
      if (version < 3 || request <= lastSpare || a < 1 || a > PID_MAX || b != 0) {
        return "protocol violation: SPARE " + request + " with pid " + Integer.toUnsignedString(a);
      }
      lastSpare = request;
      if (engine != null) { // null: a test of the protocol alone
        SPARES.execute(() -> prepare(request, a));
      }
      return null;
    }
    Pending p = pending.get(request);
    if (p == null) {
      return "protocol violation: a reply of type "
          + type
          + " for request "
          + request
          + ", which is not pending";
    }
    switch (type) {
      case STARTED -> {
        if (p.started.isDone() || a < 1 || a > PID_MAX) {
          return "protocol violation: STARTED with pid " + Integer.toUnsignedString(a);
        }
        p.started.complete(a);
      }
      case FAILED -> {
        if (a < 0 || a > 4095 || b < 1 || b >= STAGES.size() || (b == STAGE_SPARE && !p.claim)) {
          return "protocol violation: FAILED with errno " + a + " at stage " + b;
        }
        pending.remove(request);
        Outcome o = new Outcome(-1, a, STAGES.get(b), null);
        // ended first: a caller woken by started reads it (FastExec.claim falls back on it)
        p.ended.complete(o);
        p.started.complete(-1);
      }
      case EXITED -> {
        if (!p.started.isDone() || a < 0 || a > 255 || (b != 0 && b != 1)) {
          return "protocol violation: EXITED with code " + a + " and flag " + b;
        }
        pending.remove(request);
        p.ended.complete(
            b == 0
                ? new Outcome(a, 0, null, null)
                : new Outcome(
                    -1, 0, null, "the process that ran it was killed from inside the sandbox"));
      }
      default -> {
        return "protocol violation: unknown message type " + Integer.toUnsignedString(type);
      }
    }
    return null;
  }

  /** Gives the helper up: every pending command fails with {@code why}. Idempotent. */
  void lose(String why) {
    lose(why, true);
  }

  /**
   * When the JVM exits: as {@link #close} but without waiting for the helper to be gone, which in a
   * suspended sandbox would take until someone thaws it.
   */
  private void closeAtExit() {
    lose(CLOSED, false);
  }

  private void lose(String why, boolean waitForTheEnd) {
    synchronized (this) {
      if (lost != null) {
        return;
      }
      lost = why;
    }
    Running.remove(this);
    if (!why.startsWith("it ended") && !why.equals(CLOSED)) {
      LOG.log(
          System.Logger.Level.WARNING,
          "the exec helper of sandbox local:" + id + " was given up: " + why);
    }
    if (socket >= 0) {
      HelperCalls.shutdown(socket); // it reads EOF and exits
    }
    ready.completeExceptionally(new IOException("the exec helper is gone: " + why));
    for (Pending p : pending.values()) {
      fail(p, why);
    }
    pending.clear();
    // what is still in its cgroup: the helper, and commands not yet moved (none of them has run
    // anything: they wait for a go that never comes); and its spare keeper, in a group of its own
    // (it has run nothing either)
    if (engine != null) { // null: a test of the protocol alone
      Spare s;
      synchronized (spareLock) { // after lost is set: no spare is prepared after this
        s = spare.getAndSet(null);
      }
      List<String> groups = s == null ? List.of(group) : List.of(group, s.group());
      for (String g : groups) {
        if (waitForTheEnd) {
          engine.cgroups().killCommand(id, g);
        } else {
          engine.cgroups().startKill(id, g);
        }
      }
      for (String g : groups) {
        engine.cgroups().removeKilledCommandGroup(id, g);
      }
    }
  }

  private static void fail(Pending p, String why) {
    p.ended.complete(new Outcome(-1, 0, null, why)); // first, as in handle
    p.started.complete(-1);
  }

  private static final String CLOSED = "the engine closed it";

  /**
   * Ends the helper (and any command it has not let go yet) and waits until it is gone. Its reader
   * thread then reads EOF and closes the socket.
   */
  @Override
  public void close() {
    lose(CLOSED);
    if (!readerStarted) {
      closeSocket();
    }
  }

  /**
   * Moves the helper's child with pid {@code nsPid} (in the sandbox's pid namespace) into command
   * cgroup {@code commandGroup}: the host pid is the one the kernel lists in the helper's cgroup
   * whose {@code NSpid} ends in {@code nsPid}. A pidfd held across the check and the move makes
   * sure the pid written is still that process (not a reused pid).
   *
   * @return the host pid moved
   * @throws IOException if there is no such process (it was killed) or the move failed
   */
  long moveInto(int nsPid, String commandGroup) throws IOException {
    Path procs = Path.of(engine.cgroups().commandProcsFile(id, group));
    String listed;
    try {
      listed = Files.readString(procs);
    } catch (NoSuchFileException e) {
      throw new IOException("the exec helper's cgroup is gone");
    }
    for (String line : listed.split("\n")) {
      if (line.isBlank()) {
        continue;
      }
      long hostPid = Long.parseLong(line.strip());
      if (nsPidOf(hostPid) != nsPid) {
        continue;
      }
      int pidfd = HelperCalls.pidfdOpen(hostPid);
      if (pidfd < 0) {
        break; // it exited
      }
      try {
        if (nsPidOf(hostPid) != nsPid || !inGroup(hostPid)) {
          break;
        }
        Files.writeString(
            Path.of(engine.cgroups().commandProcsFile(id, commandGroup)), Long.toString(hostPid));
        if (!HelperCalls.pidfdAlive(pidfd)) {
          throw new IOException("the command's process ended while it was moved");
        }
        return hostPid;
      } finally {
        HelperCalls.close(pidfd);
      }
    }
    throw new IOException(
        "the exec helper reported pid " + nsPid + ", which is not a process of its own cgroup");
  }

  /** The helper's own host pid: the process of its cgroup whose parent is not in it. */
  java.util.Optional<Long> hostPid() {
    try {
      for (String line :
          Files.readString(Path.of(engine.cgroups().commandProcsFile(id, group))).split("\n")) {
        if (line.isBlank()) {
          continue;
        }
        long pid = Long.parseLong(line.strip());
        if (nsPidOf(pid) > 0 && !isKeeper(pid)) {
          return java.util.Optional.of(pid);
        }
      }
    } catch (IOException | RuntimeException e) {
      // gone
    }
    return java.util.Optional.empty();
  }

  /** Whether {@code pid}'s parent is in the helper's cgroup too (a keeper not yet moved). */
  private boolean isKeeper(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
      long ppid = Long.parseLong(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[1]);
      return inGroup(ppid);
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  private boolean inGroup(long hostPid) {
    try {
      return Files.readString(Path.of("/proc/" + hostPid + "/cgroup"))
          .contains("/" + id + "/" + group + "\n");
    } catch (IOException e) {
      return false;
    }
  }

  /** The last pid of {@code NSpid} in {@code /proc/PID/status} (the innermost namespace), or -1. */
  private static long nsPidOf(long hostPid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/" + hostPid + "/status"))) {
        if (line.startsWith("NSpid:")) {
          String[] f = line.substring(6).strip().split("\\s+");
          return f.length < 2 ? -1 : Long.parseLong(f[f.length - 1]);
        }
      }
    } catch (IOException | NumberFormatException e) {
      // gone
    }
    return -1;
  }
}
