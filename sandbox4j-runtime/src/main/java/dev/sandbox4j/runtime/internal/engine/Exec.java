package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.util.NoOutputWatchdog;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs one command in a sandbox: {@code crun exec} in a cgroup of its own ({@link GvisorExec} for a
 * sandbox with gVisor isolation).
 *
 * <p>The host process is {@code sh -c JOIN}: it writes its pid into the sandbox's cgroup v1 {@code
 * cgroup.procs} files (so memory, CPU and process limits hold for the command) and execs {@code
 * crun exec --cgroup cmd-…}, which puts the command into its own cgroup v2 child. Inside, {@code sh
 * -c 'exec "$@"'} starts the program, so that a missing program exits 127 and a non-executable one
 * 126, as a shell reports them (crun itself exits 255 for both).
 *
 * <p>So code in the sandbox decides whether crun can fork: a sandbox at its process limit makes
 * {@code crun exec} fail. crun writes a pid file once the command's process is set up inside; a
 * failed run without one never started the command, and the caller gets an exception saying why
 * (for a full sandbox: the process limit), not an exit status that looks like the command's.
 */
public final class Exec {
  private static final System.Logger LOG = System.getLogger(Exec.class.getName());

  /** Joins each cgroup.procs file given, then execs the rest of the arguments. */
  private static final String JOIN =
      "n=$1; shift; while [ \"$n\" -gt 0 ]; do echo $$ > \"$1\" || exit 125; shift; n=$((n-1));"
          + " done; exec \"$@\"";

  /**
   * How many of the sandbox's pids {@code crun exec} needs to start a command: itself, the child
   * that joins the namespaces, and the command's process.
   */
  static final long PIDS_TO_START = 3;

  /**
   * With a crun that {@linkplain OciRuntime#unsafeWhenForkFails is unsafe when its fork fails}, the
   * engine refuses to exec into a sandbox with fewer pids left than this. A mitigation only: the
   * sandbox can fill up between the check and crun's fork. {@code sandbox4j setup} installs a fixed
   * crun.
   */
  private static final long UNSAFE_CRUN_HEADROOM = PIDS_TO_START + 1;

  /**
   * What a command other than {@code /bin/sh} runs under, so that a missing program exits 127 and a
   * non-executable one 126, as a shell reports them.
   */
  static final List<String> EXEC_AS_SHELL = List.of("/bin/sh", "-c", "exec \"$@\"", "sh");

  private Exec() {}

  /** {@code argv} as run inside: under {@link #EXEC_AS_SHELL} unless it is {@code /bin/sh}'s. */
  static List<String> asShell(List<String> argv) {
    List<String> inside = new ArrayList<>();
    if (!argv.getFirst().equals("/bin/sh")) {
      inside.addAll(EXEC_AS_SHELL);
    }
    inside.addAll(argv);
    return inside;
  }

  /**
   * {@code argv} as run inside sandbox {@code id} with {@code env}: under {@link #EXEC_AS_SHELL}
   * where the sandbox has a {@code /bin/sh} ({@link #asShell}). An image without one still runs
   * programs: a name without {@code /} is looked up on {@code env}'s {@code PATH} in the sandbox's
   * root, as the shell would, and the program is run directly; empty if it is not there (the caller
   * reports 127, as the shell would).
   *
   * @throws WorkspaceException for a shell command ({@code /bin/sh ...}) in a sandbox without one,
   *     naming the missing shell and the image
   */
  static Optional<List<String>> inside(
      Engine engine, String id, Map<String, String> env, List<String> argv) {
    if (engine.hasShell(id)) {
      return Optional.of(asShell(argv));
    }
    requireShellFor(engine, id, argv);
    String program = argv.getFirst();
    if (program.contains("/")) {
      return Optional.of(argv);
    }
    Optional<String> found =
        engine.findInSandbox(id, program, env.getOrDefault("PATH", Engine.BASE_ENV.get("PATH")));
    if (found.isEmpty()) {
      return Optional.empty();
    }
    List<String> direct = new ArrayList<>(argv);
    direct.set(0, found.get());
    return Optional.of(direct);
  }

  /** What a program that is not on the sandbox's PATH gives: the shell's 127 and message. */
  static CommandResult notFound(String program) {
    return new CommandResult(
        127,
        new byte[0],
        (program + ": not found\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  /**
   * The command for an exec helper, or null if {@code user} is not {@code uid:gid} as two numbers
   * (a name: crun resolves it).
   */
  static CommandSpec commandSpec(
      String user, String cwd, List<String> argv, Map<String, String> env) {
    String[] f = user.split(":", -1);
    if (f.length != 2 || !f[0].matches("\\d{1,9}") || !f[1].matches("\\d{1,9}")) {
      return null;
    }
    return new CommandSpec(Integer.parseInt(f[0]), Integer.parseInt(f[1]), cwd, argv, env);
  }

  /** The host argv prefix that joins the sandbox's v1 cgroups, then execs the rest. */
  static List<String> joining(Engine engine, String id) {
    List<String> procs = engine.cgroups().v1ProcsFiles(id);
    List<String> host = new ArrayList<>(List.of("/bin/sh", "-c", JOIN, "sh"));
    host.add(Integer.toString(procs.size()));
    host.addAll(procs);
    return host;
  }

  /** Runs {@code argv} as {@code user} in {@code cwd} with exactly {@code env}. */
  public static CommandResult run(
      Engine engine,
      String id,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> argv,
      RunOptions options,
      long clockStart) {
    return run(engine, id, user, cwd, env, argv, options, clockStart, null);
  }

  /**
   * {@link #run}, killing the command (and every process it started) once it has printed nothing
   * for {@code noOutput}, if not null: then it raises {@link WorkspaceTimeoutException} with the
   * output so far.
   */
  public static CommandResult run(
      Engine engine,
      String id,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> argv,
      RunOptions options,
      long clockStart,
      Duration noOutput) {
    if (engine.isolationOf(id) == Isolation.GVISOR) {
      CommandSpec spec = commandSpec(user, cwd, argv, env);
      GvisorHelper helper = spec == null ? null : engine.gvisorHelper(id);
      if (helper != null) {
        try {
          return GvisorFastExec.run(engine, helper, id, spec, options, clockStart, noOutput);
        } catch (FastExec.HelperGoneException gone) {
          // found gone before the command was sent (killed by the previous command, say):
          // nothing ran, so once more with a new one, or through runsc exec
          helper = engine.gvisorHelper(id);
          if (helper != null) {
            return GvisorFastExec.run(engine, helper, id, spec, options, clockStart, noOutput);
          }
        }
      }
      return GvisorExec.run(engine, id, user, cwd, env, argv, options, clockStart, noOutput);
    }
    engine.runtime().requireExecFilter(id);
    CommandSpec spec = commandSpec(user, cwd, argv, env);
    ExecHelper helper = spec == null ? null : engine.execHelper(id);
    if (helper != null) {
      try {
        return fast(engine, helper, id, spec, options, clockStart, noOutput);
      } catch (FastExec.HelperGoneException gone) {
        // it died before the request reached it (killed by the previous command, say): nothing
        // ran, so once more with a new one
        helper = engine.execHelper(id);
        if (helper == null) {
          throw gone;
        }
        return fast(engine, helper, id, spec, options, clockStart, noOutput);
      }
    }
    Optional<List<String>> prepared = inside(engine, id, env, argv);
    if (prepared.isEmpty()) {
      return notFound(argv.getFirst());
    }
    List<String> inside = prepared.get();
    checkHeadroomForUnsafeRuntime(engine, id);
    String group = engine.cgroups().newCommandGroup(id);
    // crun exec once started: the watchdog's kill, like a cancellation's, must also catch a command
    // that crun is still starting (see killStarting)
    AtomicReference<Process> crun = new AtomicReference<>();
    NoOutputWatchdog watchdog =
        noOutput == null
            ? null
            : NoOutputWatchdog.start(
                noOutput,
                () -> Freezer.isFrozen(engine.cgroups(), id),
                () -> {
                  Process started = crun.get();
                  if (started == null) {
                    engine.cgroups().killCommand(id, group); // and the factory below kills it
                  } else {
                    killStarting(engine, id, group, started);
                  }
                });
    NoOutputWatchdog watching = watchdog;
    try {
      if (watchdog != null) {
        options = watchdog.watching(options);
      }
      RunOptions watched = options;
      CommandResult result =
          watched(
              watchdog,
              () ->
                  ProcessCommands.run(
                      hostProcess(engine, id, group, user, cwd, env, inside, false),
                      watched,
                      clockStart,
                      process -> {
                        crun.set(process);
                        if (watching != null && watching.fired()) { // fired before crun existed
                          killStarting(engine, id, group, process);
                        }
                        return () -> killStarting(engine, id, group, process);
                      },
                      drainer -> inCommandCgroups(engine, id, group, drainer)));
      if (!result.succeeded() && !Files.exists(engine.commandPidFile(id, group))) {
        throw notStarted(engine, id, result.exitCode(), result.stderrText());
      }
      return result;
    } catch (IOException e) {
      throw new WorkspaceException("cannot start crun exec: " + e.getMessage(), e);
    } finally {
      if (watchdog != null) {
        watchdog.close();
      }
      cleanUp(engine, id, group);
    }
  }

  /**
   * Refuses a shell command ({@code /bin/sh ...}) in sandbox {@code id} if it has no shell, naming
   * the missing shell and the image.
   */
  private static void requireShellFor(Engine engine, String id, List<String> argv) {
    if (argv.getFirst().equals("/bin/sh") && !engine.hasShell(id)) {
      throw engine.missingProgram(
          id, "/bin/sh", "a shell command cannot run; run a program directly");
    }
  }

  /**
   * {@link FastExec#run} of {@code argv}: as it is where the helper runs argv as the shell would,
   * else under {@link #inside}'s shell.
   */
  private static CommandResult fast(
      Engine engine,
      ExecHelper helper,
      String id,
      CommandSpec spec,
      RunOptions options,
      long clockStart,
      Duration noOutput) {
    if (helper.runsArgvAsShell()) {
      requireShellFor(engine, id, spec.argv());
    } else {
      Optional<List<String>> prepared = inside(engine, id, spec.env(), spec.argv());
      if (prepared.isEmpty()) {
        return notFound(spec.argv().getFirst());
      }
      spec = spec.withArgv(prepared.get());
    }
    return FastExec.run(engine, helper, id, spec, options, clockStart, noOutput);
  }

  /**
   * Runs {@code argv} on a terminal of its own, relayed to this process's stdin and stdout (which
   * must be a terminal), and returns its exit status. Interrupting the caller kills it and every
   * process it started.
   */
  public static int interactive(
      Engine engine,
      String id,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> argv) {
    if (engine.isolationOf(id) == Isolation.GVISOR) {
      throw new WorkspaceException(
          "an interactive terminal is not supported with gVisor isolation (sandbox local:"
              + id
              + "): run commands without one, e.g. `sandbox4j exec`");
    }
    engine.runtime().requireExecFilter(id);
    checkHeadroomForUnsafeRuntime(engine, id);
    String group = engine.cgroups().newCommandGroup(id);
    try {
      Process process =
          hostProcess(engine, id, group, user, cwd, env, argv, true).inheritIO().start();
      int exit;
      try {
        exit = process.waitFor();
      } catch (InterruptedException interrupted) {
        killStarting(engine, id, group, process); // it may still be starting: see there
        Thread.currentThread().interrupt();
        throw new CancellationException("interrupted: the terminal session was killed");
      }
      if (exit != 0 && !Files.exists(engine.commandPidFile(id, group))) {
        throw notStarted(engine, id, exit, ""); // crun's own message went to the terminal
      }
      return exit;
    } catch (IOException e) {
      throw new WorkspaceException("cannot start crun exec: " + e.getMessage(), e);
    } finally {
      cleanUp(engine, id, group);
    }
  }

  /** The error for a command that crun did not start: the process limit, if that is why. */
  private static WorkspaceException notStarted(
      Engine engine, String id, int exit, String runtimeStderr) {
    String said = runtimeStderr.strip();
    long headroom = engine.cgroups().pidsHeadroom(id);
    if (headroom < PIDS_TO_START || said.contains("Resource temporarily unavailable")) {
      return atProcessLimit(id);
    }
    return new WorkspaceException(
        "the command could not start in sandbox local:"
            + id
            + ": "
            + engine.runtime().binary().getFileName()
            + " exec exited "
            + exit
            + (said.isEmpty() ? "" : ": " + said));
  }

  static WorkspaceException atProcessLimit(String id) {
    return new WorkspaceException(
        "the command could not start: sandbox local:"
            + id
            + " has reached its process limit (starting a command takes "
            + PIDS_TO_START
            + " free processes). End some of its processes (a runaway fork loop?), or destroy it");
  }

  /** The mitigation for a crun older than 1.9, which {@code sandbox4j setup} replaces. */
  private static void checkHeadroomForUnsafeRuntime(Engine engine, String id) {
    if (engine.runtime().unsafeWhenForkFails()
        && engine.cgroups().pidsHeadroom(id) < UNSAFE_CRUN_HEADROOM) {
      throw atProcessLimit(id);
    }
  }

  private static void cleanUp(Engine engine, String id, String group) {
    try {
      Files.deleteIfExists(engine.commandPidFile(id, group));
    } catch (IOException e) {
      // the sandbox directory is gone with its destroy, pid files and all
    }
    engine.cgroups().removeCommandGroup(id, group);
  }

  /**
   * The host process: joins the sandbox's v1 cgroups, then execs {@code crun exec}, which writes
   * {@link Engine#commandPidFile} once the command is set up inside. (Not private: the isolation
   * test runs it with stdio on host files.)
   */
  /**
   * Kills a command that may still be starting, whatever the moment: before crun runs, while it
   * sets up, or once the command runs.
   *
   * <p>{@code crun exec} forks a process that joins the sandbox's namespaces and forks the
   * command's process, which waits on a socket while crun moves it into the command's cgroup; only
   * then does crun let it go on and exec the command. So the cgroup can be empty when a kill comes
   * and hold the command a moment later: a single kill misses it. What ends the race is crun's own
   * end: once crun is gone, nothing more can join the cgroup, and a process it had forked but not
   * yet moved reads the end of that socket and exits without running anything. Hence:
   *
   * <ol>
   *   <li>the cgroup is frozen: what is in it, or is moved into it from now on, runs no further
   *       instruction (a kill still ends it), so a command never acts on its stdin closing when
   *       crun ends (the JDK closes a process's stdin when it exits), e.g. by committing a
   *       truncated file;
   *   <li>the cgroup is killed until crun has ended: crun waits for the command it started, so it
   *       normally ends once that is killed;
   *   <li>crun is killed if it did not end in {@link #KILL_WAIT} (a loaded host, or crun stuck),
   *       and waited for;
   *   <li>the cgroup is killed once more, after crun's end: a command crun moved there after the
   *       previous kill (just before it ended or was killed) is killed now. Before, a crun killed
   *       after the wait was assumed to have left nothing behind, and a command it had just let go
   *       ran on.
   * </ol>
   *
   * The cgroup is thawed at the end (empty by then), so that a drainer of leftover output can still
   * join it. A second interrupt during all this does not cut it short; it is kept for the caller.
   */
  public static void killStarting(Engine engine, String id, String group, Process crun) {
    boolean interrupted = Thread.interrupted();
    Cgroups cgroups = engine.cgroups();
    cgroups.freezeCommand(id, group, true);
    try {
      long end = System.nanoTime() + KILL_WAIT.toNanos();
      boolean ended;
      do {
        cgroups.killCommand(id, group);
        ended = awaitExit(crun, Duration.ofMillis(2));
      } while (!ended && System.nanoTime() < end);
      if (!ended) {
        crun.destroyForcibly();
        if (!awaitExit(crun, KILL_WAIT)) {
          LOG.log(
              System.Logger.Level.WARNING,
              "crun exec (pid "
                  + crun.pid()
                  + ") of sandbox local:"
                  + id
                  + " did not end after SIGKILL; its command cgroup "
                  + group
                  + " stays frozen");
          cgroups.killCommand(id, group);
          return; // not thawed: whatever crun still moves in there stays stopped
        }
      }
      cgroups.killCommand(id, group); // crun is gone: nothing can join the cgroup any more
      cgroups.freezeCommand(id, group, false);
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A command's host process, run: what {@link #watched} runs. */
  interface HostRun {
    CommandResult run() throws IOException;
  }

  /**
   * Runs a command's host process under the no-output {@code watchdog}, if not null: a run the
   * watchdog killed is a timeout carrying the output so far, whatever the kill made of the run.
   */
  static CommandResult watched(NoOutputWatchdog watchdog, HostRun run) throws IOException {
    CommandResult result;
    try {
      result = run.run();
    } catch (WorkspaceException e) {
      if (watchdog != null) {
        watchdog.close();
        if (watchdog.fired()) {
          throw watchdog.timeout(new byte[0], new byte[0]);
        }
      }
      throw e;
    }
    if (watchdog != null) {
      watchdog.close(); // before asking: a command that ended in time stays a result
      if (watchdog.fired()) {
        throw watchdog.timeout(result.stdout(), result.stderr());
      }
    }
    return result;
  }

  /** Waits up to {@code max} for {@code process} to end; an interrupt does not cut it short. */
  static boolean awaitExit(Process process, Duration max) {
    long end = System.nanoTime() + max.toNanos();
    boolean interrupted = false;
    try {
      while (true) {
        try {
          return process.waitFor(
              Math.max(0, end - System.nanoTime()), java.util.concurrent.TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** How long a killed command's {@code crun exec} may take to end. */
  private static final Duration KILL_WAIT = Duration.ofSeconds(10);

  public static ProcessBuilder hostProcess(
      Engine engine,
      String id,
      String group,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> inside,
      boolean tty) {
    List<String> procs = engine.cgroups().v1ProcsFiles(id);
    List<String> host = new ArrayList<>(List.of("/bin/sh", "-c", JOIN, "sh"));
    host.add(Integer.toString(procs.size()));
    host.addAll(procs);
    host.addAll(
        engine
            .runtime()
            .execArgv(id, group, user, cwd, env, inside, tty, engine.commandPidFile(id, group)));
    ProcessBuilder builder = new ProcessBuilder(host);
    builder.environment().clear();
    builder.environment().put("PATH", Engine.BASE_ENV.get("PATH"));
    return builder;
  }

  /**
   * {@code argv} as a host process that first joins the sandbox's v1 cgroups and the command's own
   * v2 cgroup: where output that a background child writes after the command returned is drained
   * ({@link ProcessCommands.LeftoverOutput}). The drainer's process, memory and CPU then count
   * against the sandbox's limits (and those of all sandboxes), it is frozen with the sandbox, and
   * the command's or the sandbox's end kills it; it reads and drops bytes, nothing else. If the
   * command's cgroup is gone already (its last process exited), it does not start: nothing writes.
   */
  static List<String> inCommandCgroups(Engine engine, String id, String group, List<String> argv) {
    List<String> procs = new ArrayList<>(engine.cgroups().v1ProcsFiles(id));
    procs.add(engine.cgroups().commandProcsFile(id, group));
    List<String> host = new ArrayList<>(List.of("/bin/sh", "-c", JOIN, "sh"));
    host.add(Integer.toString(procs.size()));
    host.addAll(procs);
    host.addAll(argv);
    return host;
  }

  /** Runs a setup command as root inside the sandbox and fails unless it exits 0. */
  public static void checkAsRoot(Engine engine, String id, List<String> argv) {
    CommandResult r =
        run(
            engine,
            id,
            "0:0",
            "/",
            Engine.BASE_ENV,
            argv,
            RunOptions.withTimeout(Duration.ofSeconds(60)),
            System.nanoTime());
    if (!r.succeeded()) {
      throw new WorkspaceException(
          "setting up sandbox local:"
              + id
              + " failed: "
              + String.join(" ", argv)
              + " exited "
              + r.exitCode()
              + ": "
              + r.stderrText().strip());
    }
  }
}
