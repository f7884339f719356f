package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.NoOutputWatchdog;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs one command in a gVisor sandbox: {@code runsc exec}. Its processes live in the Sentry, not
 * on the host, so the host's cgroups that {@link Exec} kills a container's command by cannot tell
 * them apart. Instead the command runs under {@code catatonit -- /bin/sh -c 'exec "$@"'}:
 * catatonit, when it is not the init, makes itself a child subreaper, so every process the command
 * starts stays its descendant while it runs, including those that called {@code setsid} and those
 * whose parent exited (a daemon's double fork). A kill (timeout, no output, cancellation) stops
 * catatonit's tree and then kills it ({@link #killTree}). A command that ends on its own leaves its
 * background processes running, as in a container (catatonit exits and they are reparented to the
 * init).
 *
 * <p>{@code runsc exec} writes the command's pid inside the sandbox to a file once it runs; a
 * failed run without one never started the command.
 */
final class GvisorExec {
  /** How long a killed command's {@code runsc exec} may take to end. */
  private static final Duration KILL_WAIT = Duration.ofSeconds(10);

  private GvisorExec() {}

  /** {@link Exec#run} for a sandbox with gVisor isolation. */
  static CommandResult run(
      Engine engine,
      String id,
      String user,
      String cwd,
      Map<String, String> env,
      List<String> argv,
      RunOptions options,
      long clockStart,
      Duration noOutput) {
    OciRuntime runtime = engine.runtimeOf(id);
    String name = "gvisor-" + java.util.UUID.randomUUID();
    Path pidFile = engine.commandPidFile(id, name);
    Path processFile = pidFile.resolveSibling(name + ".json");
    AtomicReference<Process> started = new AtomicReference<>();
    NoOutputWatchdog watchdog =
        noOutput == null
            ? null
            : NoOutputWatchdog.start(
                noOutput,
                () -> Freezer.isFrozen(engine.cgroups(), id),
                () -> {
                  Process p = started.get();
                  if (p != null) {
                    kill(engine, id, pidFile, p);
                  }
                });
    try {
      if (watchdog != null) {
        options = watchdog.watching(options);
      }
      if (!engine.hasShell(id)) {
        // its kill of a command's processes (killTree) is a shell script run inside
        throw engine.missingProgram(
            id, "/bin/sh", "commands under gVisor isolation need it; use Isolation.CONTAINER");
      }
      List<String> inside = new ArrayList<>(List.of(OciConfig.initPath(), "--"));
      if (!argv.getFirst().equals("/bin/sh")) {
        inside.addAll(Exec.EXEC_AS_SHELL);
      }
      inside.addAll(argv);
      writeProcess(processFile, user, cwd, env, inside);
      ProcessBuilder host = new ProcessBuilder(runtime.gvisorExecArgv(id, processFile, pidFile));
      host.environment().clear();
      host.environment().put("PATH", Engine.BASE_ENV.get("PATH"));
      NoOutputWatchdog watching = watchdog;
      RunOptions watched = options;
      CommandResult result =
          Exec.watched(
              watchdog,
              () ->
                  dev.sandbox4j.workspace.spi.ProcessCommands.run(
                      host,
                      watched,
                      clockStart,
                      process -> {
                        started.set(process);
                        if (watching != null && watching.fired()) { // fired before runsc existed
                          kill(engine, id, pidFile, process);
                        }
                        return () -> kill(engine, id, pidFile, process);
                      }));
      if (!result.succeeded() && !Files.exists(pidFile)) {
        String said = result.stderrText().strip();
        throw new WorkspaceException(
            "the command could not start in sandbox local:"
                + id
                + ": runsc exec exited "
                + result.exitCode()
                + (said.isEmpty() ? "" : ": " + said));
      }
      return result;
    } catch (IOException e) {
      throw new WorkspaceException("cannot start runsc exec: " + e.getMessage(), e);
    } finally {
      if (watchdog != null) {
        watchdog.close();
      }
      try {
        Files.deleteIfExists(pidFile);
        Files.deleteIfExists(processFile);
      } catch (IOException e) {
        // the sandbox directory is gone with its destroy, pid files and all
      }
    }
  }

  /** Writes the OCI process of a command for {@code runsc exec --process}, root's alone. */
  private static void writeProcess(
      Path file, String user, String cwd, Map<String, String> env, List<String> argv) {
    try {
      dev.sandbox4j.runtime.internal.util.PrivateFiles.writeNew(
          file, OciConfig.execProcess(user, cwd, env, argv));
    } catch (IOException e) {
      throw new WorkspaceException("cannot write " + file + ": " + e.getMessage(), e);
    }
  }

  /**
   * Kills the command of {@code runsc} and every process it started, whatever the moment: before
   * the command runs (no pid yet: {@code runsc exec} is waited for, then killed), while it runs, or
   * as it ends. Returns once {@code runsc exec} has ended, or after {@link #KILL_WAIT}.
   */
  static void kill(Engine engine, String id, Path pidFile, Process runsc) {
    boolean interrupted = Thread.interrupted();
    try {
      long end = System.nanoTime() + KILL_WAIT.toNanos();
      boolean ended;
      do {
        commandPid(pidFile).ifPresent(pid -> killTree(engine, id, pid));
        ended = Exec.awaitExit(runsc, Duration.ofMillis(20));
      } while (!ended && System.nanoTime() < end);
      if (!ended) {
        runsc.destroyForcibly();
        Exec.awaitExit(runsc, KILL_WAIT);
      }
      // runsc may have started the command just before it ended: its pid file says so
      commandPid(pidFile).ifPresent(pid -> killTree(engine, id, pid));
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Kills process {@code root} inside the sandbox and all its descendants, from a root shell in the
   * sandbox (one {@code runsc exec}, where a {@code runsc kill} per process would cost one each):
   * the tree is listed from {@code /proc} and stopped with SIGSTOP until a listing finds nothing
   * new (a stopped process forks no more); then every process but the root is killed, and the root,
   * catatonit, only once they are dead. catatonit is the subreaper that keeps the tree below it,
   * and it must outlive the rest: when a process whose subreaper is exiting dies, gVisor's Sentry
   * (this release) finds no process to hand its children to and kills every process of the sandbox,
   * the init included, as if a PID namespace's init had died. The shell only signals processes of
   * the sandbox; what it prints is dropped.
   */
  static void killTree(Engine engine, String id, long root) {
    if (root < 2) {
      return; // never the init: its end is the sandbox's
    }
    OciRuntime runtime = engine.runtimeOf(id);
    String name = "gvisor-kill-" + java.util.UUID.randomUUID();
    Path processFile = engine.commandPidFile(id, name).resolveSibling(name + ".json");
    try {
      writeProcess(
          processFile,
          "0:0",
          "/",
          Map.of("PATH", Engine.BASE_ENV.get("PATH")),
          List.of("/bin/sh", "-c", KILL_TREE, "sh", Long.toString(root)));
      HostCommand.run(runtime.gvisorExecArgv(id, processFile, null));
    } finally {
      try {
        Files.deleteIfExists(processFile);
      } catch (IOException e) {
        // gone with the sandbox's directory
      }
    }
  }

  /** The shell of {@link #killTree}: {@code $1} is the root of the tree. */
  static final String KILL_TREE =
      """
      tree() {
        list=" $1 "; changed=1
        while [ $changed = 1 ]; do
          changed=0
          for d in /proc/[0-9]*; do
            n=${d#/proc/}
            [ "$n" = 1 ] && continue
            case "$list" in *" $n "*) continue ;; esac
            pp=
            while read -r k v; do
              if [ "$k" = PPid: ]; then pp=$v; break; fi
            done 2>/dev/null < "$d/status"
            case "$list" in *" $pp "*) list="$list$n "; changed=1 ;; esac
          done
        done
        echo $list
      }
      running() {
        while read -r k v; do
          if [ "$k" = State: ]; then [ "${v%% *}" != Z ]; return; fi
        done 2>/dev/null < "/proc/$1/status"
        return 1
      }
      prev=
      while :; do
        cur=$(tree "$1")
        kill -STOP $cur 2>/dev/null
        [ "$cur" = "$prev" ] && break
        prev=$cur
      done
      rest=
      for p in $cur; do [ "$p" = "$1" ] || rest="$rest $p"; done
      kill -KILL $rest 2>/dev/null
      tries=0
      while [ $tries -lt 500 ]; do
        left=
        for p in $rest; do running "$p" && left="$left $p"; done
        [ -z "$left" ] && break
        rest=$left; tries=$((tries + 1)); sleep 0.01
      done
      kill -KILL "$1" 2>/dev/null
      """;

  private static Optional<Long> commandPid(Path pidFile) {
    try {
      String text = Files.readString(pidFile).strip();
      return text.matches("\\d{1,10}") ? Optional.of(Long.parseLong(text)) : Optional.empty();
    } catch (IOException e) {
      return Optional.empty();
    }
  }
}
