package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.util.NoOutputWatchdog;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs one command through the sandbox's {@link ExecHelper} instead of a {@code crun exec}: the
 * same guarantees as {@link Exec}, at the cost of a fork inside and a few messages.
 *
 * <ol>
 *   <li>This JVM makes the command's pipes (stdout and stderr: {@link ProcessCommands}'s, so output
 *       limits, the drain grace and leftover output work as for any process; stdin; and a "go"
 *       pipe) and sends their ends to the helper with the command.
 *   <li>The helper forks a keeper, which waits on the go pipe, and reports its pid.
 *   <li>This JVM moves the keeper into a fresh command cgroup ({@link ExecHelper#moveInto}), then
 *       writes the go byte: from then on everything the command starts, setsid'd and double-forked
 *       daemons too, is in that cgroup, and a kill of the cgroup (freeze, kill, thaw) ends it all.
 *       Nothing of the command runs before the move: a cancel before it closes the go pipe and the
 *       keeper exits without running anything.
 *   <li>The keeper takes on the user ({@code setgroups(0)}, {@code setgid}, {@code setuid}: as
 *       {@code crun exec --user uid:gid}, a non-root user has no capabilities) and the working
 *       directory, vforks the command (run as {@code sh -c 'exec "$@"'} would run it, without that
 *       shell: a missing program exits 127), waits for it and exits with its code (128 + signal).
 * </ol>
 *
 * Where the helper has a spare keeper already moved into a command cgroup of its own ({@link
 * ExecHelper#takeSpare}), steps 2 and 3 are skipped: the command is sent as a claim of that spare,
 * which runs it at once in that cgroup; a spare found gone (killed from inside) ran nothing, and
 * the command starts as above in its cgroup.
 *
 * <p>The command's seccomp filter, capability bounding set, namespaces, rlimits and the sandbox's
 * v1 cgroups (memory, pids, CPU) are the helper's, which {@code crun exec} gave it like to any
 * command.
 */
final class FastExec {
  /** The longest wait for the helper to report a command's start (its sandbox may be loaded). */
  private static final Duration START_WAIT = Duration.ofSeconds(30);

  private FastExec() {}

  static CommandResult run(
      Engine engine,
      ExecHelper helper,
      String id,
      CommandSpec command,
      RunOptions options,
      long clockStart,
      Duration noOutput) {
    // As for crun exec: a sandbox with fewer than PIDS_TO_START pids left gets the process limit
    // error, not a command whose shell then cannot fork (the keeper and the command take two).
    if (engine.cgroups().pidsHeadroom(id) < Exec.PIDS_TO_START) {
      throw Exec.atProcessLimit(id);
    }
    ExecHelper.Spare spare = helper.takeSpare();
    String group = spare != null ? spare.group() : engine.cgroups().newCommandGroup(id);
    NoOutputWatchdog watchdog =
        noOutput == null
            ? null
            : NoOutputWatchdog.start(
                noOutput,
                () -> Freezer.isFrozen(engine.cgroups(), id),
                () -> kill(engine, id, group)); // before the start: the factory kills it too
    NoOutputWatchdog watching = watchdog;
    AtomicReference<HelperCommand> started = new AtomicReference<>();
    try {
      if (watchdog != null) {
        options = watchdog.watching(options);
      }
      RunOptions watched = options;
      CommandResult result =
          Exec.watched(
              watchdog,
              () ->
                  ProcessCommands.run(
                      (stdout, stderr) -> {
                        HelperCommand c =
                            new Start(engine, helper, id, command, watched, clockStart)
                                .launch(spare, group, stdout, stderr);
                        started.set(c);
                        return c;
                      },
                      watched,
                      clockStart,
                      process -> {
                        if (watching != null && watching.fired()) { // fired during the start
                          kill(engine, id, group);
                        }
                        return () -> kill(engine, id, group);
                      },
                      drainer -> Exec.inCommandCgroups(engine, id, group, drainer)));
      ExecHelper.Outcome outcome = started.get().outcome();
      if (outcome != null && outcome.lost() != null) {
        kill(engine, id, group);
        throw new WorkspaceException(
            "the exec helper of sandbox local:"
                + id
                + " ended while the command ran ("
                + outcome.lost()
                + "); the command and every process it started were killed. Running it again"
                + " starts a new helper");
      }
      if (outcome != null && outcome.failedToStart()) {
        throw notStarted(id, outcome);
      }
      return result;
    } catch (HelperGone e) {
      throw new HelperGoneException(e);
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot start the command in sandbox local:" + id + ": " + e.getMessage(), e);
    } finally {
      if (watchdog != null) {
        watchdog.close();
      }
      try {
        java.nio.file.Files.deleteIfExists(engine.commandPidFile(id, group));
      } catch (IOException e) {
        // the sandbox directory is gone with its destroy, pid files and all
      }
      engine.cgroups().removeCommandGroup(id, group);
    }
  }

  /**
   * The helper was found gone before the request reached it: nothing of the command ran, and the
   * caller may try once more with a new helper ({@link HelperGoneException} carries it out of
   * {@link #run}).
   */
  static final class HelperGone extends IOException {
    HelperGone(String why) {
      super("the exec helper is gone: " + why);
    }
  }

  /** {@link HelperGone} out of {@link #run}: nothing of the command ran. */
  static final class HelperGoneException extends WorkspaceException {
    HelperGoneException(HelperGone cause) {
      super(cause.getMessage(), cause);
    }
  }

  /** Freezes the command's cgroup, kills everything in it, thaws it (empty by then). */
  static void kill(Engine engine, String id, String group) {
    engine.cgroups().freezeCommand(id, group, true);
    engine.cgroups().killCommand(id, group);
    engine.cgroups().freezeCommand(id, group, false);
  }

  /**
   * Why request {@code pending}, reported not started, did not: its failure, or the helper's loss.
   */
  private static WorkspaceException didNotStart(String id, ExecHelper.Pending pending) {
    ExecHelper.Outcome o = pending.ended.getNow(null);
    if (o != null && o.failedToStart()) {
      return notStarted(id, o);
    }
    return new WorkspaceException(
        "the command could not start in sandbox local:"
            + id
            + ": its exec helper is gone ("
            + (o == null ? "?" : o.lost())
            + "); running it again starts a new helper");
  }

  private static WorkspaceException notStarted(String id, ExecHelper.Outcome o) {
    if (o.errno() == 11 /* EAGAIN */ && o.stage().startsWith("fork")) {
      return Exec.atProcessLimit(id);
    }
    return new WorkspaceException(
        "the command could not start in sandbox local:"
            + id
            + ": cannot "
            + o.stage()
            + ": "
            + HelperCalls.strerror(o.errno()));
  }

  /** One command's start through {@code helper}, bounded by {@code options}' timeout. */
  private record Start(
      Engine engine,
      ExecHelper helper,
      String id,
      CommandSpec command,
      RunOptions options,
      long clockStart) {

    /**
     * Starts the command in {@code group}: in {@code spare} if there is one (already in that
     * group), else in a keeper moved there before it runs anything.
     */
    HelperCommand launch(
        ExecHelper.Spare spare,
        String group,
        ProcessBuilder.Redirect stdout,
        ProcessBuilder.Redirect stderr)
        throws IOException {
      if (stdout.file() == null || stderr.file() == null) {
        throw new IOException("no pipes of its own to give the command (no native access)");
      }
      if (spare != null) {
        HelperCommand claimed = claim(spare, stdout, stderr);
        if (claimed != null) {
          return claimed;
        }
        // the spare was gone: nothing ran; its (empty) cgroup serves the command started below
      }
      try (Descriptors fds = Descriptors.open(stdout, stderr, true)) {
        ExecHelper.Pending pending;
        try {
          pending = helper.submit(fds.forHelper(), command);
        } finally {
          fds.handedOver();
        }
        int nsPid = awaitStart(pending);
        if (nsPid < 0) {
          throw didNotStart(id, pending);
        }
        long hostPid;
        try {
          hostPid = helper.moveInto(nsPid, group);
        } catch (IOException e) {
          throw new WorkspaceException(
              "the command could not start in sandbox local:"
                  + id
                  + ": "
                  + e.getMessage()
                  + " (was the helper's process killed inside the sandbox?)",
              e);
        }
        writePidFile(group, hostPid);
        HelperCommand started = new HelperCommand(hostPid, fds.stdin(), pending);
        try {
          fds.go(); // from here on it runs, in its cgroup
        } catch (IOException e) {
          started.getOutputStream().close();
          throw e;
        }
        return started;
      }
    }

    /**
     * Starts the command in spare keeper {@code spare}, already in the command's cgroup: no fork,
     * no move, no go byte on its path. Null if the spare was gone (nothing ran).
     */
    private HelperCommand claim(
        ExecHelper.Spare spare, ProcessBuilder.Redirect stdout, ProcessBuilder.Redirect stderr)
        throws IOException {
      try (Descriptors fds = Descriptors.open(stdout, stderr, false)) {
        ExecHelper.Pending pending;
        try {
          pending = helper.claim(spare, fds.forHelper(), command);
        } finally {
          fds.handedOver();
        }
        // Waiting for STARTED keeps a fallback possible: until the spare has the command, nothing
        // of it ran and no stdin was fed to it.
        int nsPid = awaitStart(pending);
        if (nsPid < 0) {
          ExecHelper.Outcome o = pending.ended.getNow(null);
          if (o != null && o.spareGone()) {
            return null;
          }
          throw didNotStart(id, pending);
        }
        if (nsPid != spare.nsPid()) {
          helper.lose(
              "protocol violation: a claim of spare " + spare.nsPid() + " started " + nsPid);
          throw new WorkspaceException(
              "the command could not start in sandbox local:"
                  + id
                  + ": its exec helper misbehaved and was given up");
        }
        writePidFile(spare.group(), spare.hostPid());
        return new HelperCommand(spare.hostPid(), fds.stdin(), pending);
      }
    }

    /**
     * As crun exec's {@code --pid-file}: the supervisor sees a sandbox running a command as busy.
     */
    private void writePidFile(String group, long hostPid) throws IOException {
      java.nio.file.Files.writeString(
          engine.commandPidFile(id, group), Long.toString(hostPid) + "\n");
    }

    /**
     * The command's pid in the sandbox once the helper reports it, or -1 if it failed to start or
     * the helper is gone. Bounded by the command's deadline and {@link #START_WAIT}: a helper that
     * does not answer is given up.
     */
    private int awaitStart(ExecHelper.Pending pending) {
      long now = System.nanoTime();
      long deadline = options.timeout().map(t -> clockStart + t.toNanos()).orElse(Long.MAX_VALUE);
      long wait = Math.min(START_WAIT.toNanos(), Math.max(0, deadline - now));
      try {
        return pending.started.get(wait, TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CancellationException(
            "command cancelled by interruption before it started; nothing of it ran");
      } catch (ExecutionException e) {
        return -1;
      } catch (TimeoutException e) {
        if (System.nanoTime() - deadline >= 0) {
          throw new WorkspaceTimeoutException(
              options.timeout().orElseThrow(), new byte[0], new byte[0]);
        }
        helper.lose("it did not report a command's start within " + START_WAIT.toSeconds() + " s");
        throw new WorkspaceException(
            "the command could not start in sandbox local:"
                + id
                + ": its exec helper did not answer and was given up");
      }
    }
  }

  /**
   * A command's descriptors on their way to the helper: its stdin pipe, its output files and, for a
   * keeper that waits before it runs anything, the "go" pipe. The helper's ends are closed once
   * sent ({@link #handedOver}; it has copies, or never will); the rest on {@link #close}. Closing
   * the go pipe's write end without a byte tells a waiting keeper not to run anything.
   */
  private static final class Descriptors implements AutoCloseable {
    private final int[] in = {-1, -1};
    private final int[] go = {-1, -1};
    private int out = -1;
    private int err = -1;

    private Descriptors() {}

    static Descriptors open(
        ProcessBuilder.Redirect stdout, ProcessBuilder.Redirect stderr, boolean withGo)
        throws IOException {
      Descriptors d = new Descriptors();
      try {
        System.arraycopy(HelperCalls.pipe(), 0, d.in, 0, 2);
        if (withGo) {
          System.arraycopy(HelperCalls.pipe(), 0, d.go, 0, 2);
        }
        d.out = HelperCalls.open(stdout.file().getPath(), HelperCalls.O_WRONLY);
        d.err = HelperCalls.open(stderr.file().getPath(), HelperCalls.O_WRONLY);
        return d;
      } catch (IOException e) {
        d.close();
        throw e;
      }
    }

    /** Stdin's read end, stdout, stderr and, if there is one, the go pipe's read end. */
    int[] forHelper() {
      return go[0] < 0 ? new int[] {in[0], out, err} : new int[] {in[0], out, err, go[0]};
    }

    void handedOver() {
      in[0] = closed(in[0]);
      out = closed(out);
      err = closed(err);
      go[0] = closed(go[0]);
    }

    /** Stdin's write end, which {@link HelperCommand} reopens as its own. */
    int stdin() {
      return in[1];
    }

    /** Lets the waiting keeper run the command. */
    void go() throws IOException {
      HelperCalls.writeFully(go[1], new byte[] {1});
    }

    @Override
    public void close() {
      handedOver();
      in[1] = closed(in[1]);
      go[1] = closed(go[1]);
    }

    private static int closed(int fd) {
      HelperCalls.close(fd);
      return -1;
    }
  }
}
