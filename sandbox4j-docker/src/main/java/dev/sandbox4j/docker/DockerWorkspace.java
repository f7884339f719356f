package dev.sandbox4j.docker;

import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.exception.ConflictException;
import com.github.dockerjava.api.exception.DockerException;
import com.github.dockerjava.api.exception.NotFoundException;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.spi.MarkedTrees;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One sandbox: a container of the daemon, created on first use (or attached to by ref). Commands
 * are execs wrapped in the container's init ({@code /sbin/docker-init -s}, tini, which Docker
 * mounts into every container started with {@code Init}; Podman's catatonit, {@code
 * /run/podman-init}, see {@link Daemon#init}): as a subreaper it adopts whatever the command's
 * processes orphan, {@code setsid} daemons included, so the whole tree stays below the init that
 * carries the command's marker ({@link #MARKER}). An exec cannot be killed through the API, so a
 * kill is a second exec, as root, that stops and then kills that tree ({@link #KILL_TREE}). Files
 * go through commands ({@code CommandFileSystem}). State: {@code id} and {@code workingDirectory}
 * are set once, under {@code this}.
 */
final class DockerWorkspace implements WorkspaceBackend, SupportsCommands {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final System.Logger LOG = System.getLogger(DockerWorkspace.class.getName());

  /**
   * The argument that marks a command's init: {@code /sbin/docker-init -s -- /bin/sh -c 'exec "$@"'
   * sandbox4j-command-ID argv...}. The shell execs the command at once, so only the init keeps it
   * (on Podman, {@code /run/podman-init -- /bin/sh -c RELAYED ...}, the shell stays as the parent
   * of the command and its relays, and keeps it too), and its {@code /proc/PID/cmdline} is readable
   * by any user (an environment variable would not be: root in the container lacks CAP_SYS_PTRACE
   * to read another user's environ).
   */
  static final String MARKER = "sandbox4j-command-";

  /**
   * Stops, then kills, the init whose arguments include the marker {@code sandbox4j-command-$1} and
   * every descendant of it (its adoptees too, as a subreaper): stopped first, so that none forks
   * while the tree is walked. POSIX sh, {@code tr} and {@code grep} only, so that it runs in any
   * image with a shell; as root, whose CAP_KILL reaches processes of every user.
   */
  static final String KILL_TREE = MarkedTrees.killScript(MarkedTrees.MarkerIn.CMDLINE, MARKER);

  /**
   * The shell that runs a command on Podman, in place of {@code exec "$@"}. Podman's exec ends the
   * command's output as soon as its process exits (conmon stops reading the pipes), so a background
   * child lost whatever it wrote after that, and its next write killed it (SIGPIPE): a server
   * started with {@code cmd &} died at its next log line. So the command writes into two FIFOs (in
   * a fresh private directory, unlinked once open), each read by a relay that copies to the exec's
   * stream and, once that is closed, goes on reading into /dev/null ({@code cat} with SIGPIPE
   * ignored, then {@code exec cat >/dev/null}), so that a writer never loses its reader; and the
   * shell waits for the relays to reach the end of their input, at most about 2 s (the drain
   * grace), before it exits with the command's status. Without a writable temporary directory or
   * {@code mkfifo} it falls back to {@code exec "$@"}. POSIX {@code sh}, {@code mktemp}, {@code
   * mkfifo}, {@code cat} and {@code sleep} with a fraction only.
   */
  static final String RELAYED =
      """
      d=$(mktemp -d 2>/dev/null) && mkfifo "$d/o" "$d/e" 2>/dev/null \
        || { [ -n "$d" ] && rm -rf "$d"; exec "$@"; }
      (trap '' PIPE; cat; exec cat >/dev/null) <"$d/o" 2>/dev/null & o=$!
      (trap '' PIPE; cat >&2; exec cat >/dev/null) <"$d/e" & e=$!
      "$@" >"$d/o" 2>"$d/e"
      c=$?
      rm -rf "$d"
      n=0
      while { kill -0 $o || kill -0 $e; } 2>/dev/null && [ $n -lt 200 ]; do
        sleep 0.01; n=$((n + 1))
      done
      exit $c
      """;

  private final DockerSandbox sandboxes;
  private final String attachId;
  private String id;
  private String workingDirectory;

  DockerWorkspace(DockerSandbox sandboxes, String attachId) {
    this.sandboxes = sandboxes;
    this.attachId = attachId;
    this.id = attachId;
  }

  @Override
  public synchronized Optional<WorkspaceRef> ref() {
    return Optional.ofNullable(id).map(i -> new WorkspaceRef(DockerSandbox.NAME, i));
  }

  @Override
  public String workingDirectory() {
    return acquire();
  }

  /** Creates the container, or checks the attached one exists; returns the working directory. */
  private synchronized String acquire() {
    if (workingDirectory != null) {
      return workingDirectory;
    }
    if (attachId == null && id == null) {
      sandboxes.beforeCreate().run();
      String fresh = HexFormat.of().formatHex(randomBytes()).substring(0, 12);
      sandboxes.createContainer(fresh, null, null);
      id = fresh;
    }
    InspectContainerResponse container = sandboxes.inspect(id);
    if (attachId != null) {
      sandboxes.attached(id, container);
    }
    String dir = container.getConfig().getWorkingDir();
    workingDirectory = dir == null || dir.isEmpty() ? "/" : dir;
    return workingDirectory;
  }

  /** Creates this new sandbox's container from {@code image}, a fork of {@code parent}'s. */
  synchronized void createFrom(String image, String parent) {
    String fresh = HexFormat.of().formatHex(randomBytes()).substring(0, 12);
    sandboxes.createContainer(fresh, image, parent);
    id = fresh;
  }

  private static byte[] randomBytes() {
    byte[] b = new byte[8];
    RANDOM.nextBytes(b);
    return b;
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    String dir = acquire();
    long clockStart = System.nanoTime();
    String commandId = HexFormat.of().formatHex(randomBytes());
    List<String> argv = command.toArgv();
    List<String> env = new ArrayList<>(); // added to the container's own (image, builder)
    for (Map.Entry<String, String> e : options.env().entrySet()) {
      env.add(e.getKey() + "=" + e.getValue());
    }
    sandboxes.touch(id);
    ExecProcess process = start(argv, env, dir, commandId);
    try {
      CommandResult result =
          ProcessCommands.await(
              process,
              process.getInputStream(),
              process.getErrorStream(),
              options,
              clockStart,
              () -> kill(commandId));
      if (process.containerGone()
          || (result.exitCode() > 128 && sandboxes.killedByItsEnd(id, result.exitCode()))) {
        throw gone(null);
      }
      return result;
    } catch (RuntimeException e) {
      if (process.containerGone() && !(e instanceof WorkspaceUnavailableException)) {
        throw gone(e);
      }
      throw e;
    } finally {
      process.release();
      sandboxes.touch(id);
    }
  }

  /**
   * Starts the exec of {@code command} under the daemon's init, waking a paused or stopped
   * container first (any operation wakes it).
   */
  private ExecProcess start(List<String> command, List<String> env, String dir, String commandId) {
    for (int attempt = 0; ; attempt++) {
      try {
        Daemon daemon = sandboxes.daemon();
        List<String> argv = new ArrayList<>(daemon.init());
        argv.addAll(
            List.of(
                "/bin/sh", "-c", daemon.podman() ? RELAYED : "exec \"$@\"", MARKER + commandId));
        argv.addAll(command);
        return sandboxes.exec(id, argv, env, dir, null, commandId);
      } catch (NotFoundException e) {
        throw gone(e);
      } catch (ConflictException e) {
        if (attempt > 0) {
          throw new WorkspaceException(
              "cannot run a command in sandbox docker:" + id + ": " + e.getMessage(), e);
        }
        sandboxes.wake(id);
      } catch (DockerException e) {
        throw Daemon.translate("cannot run a command in sandbox docker:" + id, e);
      }
    }
  }

  /**
   * Kills every process of command {@code commandId}; quiet if the container is gone. The kill runs
   * on a thread of its own, which this one waits for whatever happens to it: the caller is often a
   * thread being cancelled, its interrupt flag set (and set again by the JDK where it was cleared),
   * and a daemon call made on an interrupted thread fails with ClosedByInterruptException, which
   * left a cancelled command's processes running in about one conformance run in ten.
   */
  private void kill(String commandId) {
    Thread killing =
        Thread.ofVirtual()
            .name("sandbox4j-docker-kill-" + commandId)
            .start(() -> killNow(commandId));
    boolean interrupted = false;
    while (true) {
      try {
        killing.join();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private void killNow(String commandId) {
    try {
      ExecProcess killer =
          sandboxes.exec(
              id,
              List.of("/bin/sh", "-c", KILL_TREE, "kill-tree", commandId),
              // it runs as root: never a tool from a directory the image's PATH may let a user
              // write to (the command's user could plant a 'tr' there and be run as root)
              List.of("PATH=/usr/sbin:/usr/bin:/sbin:/bin"),
              "/",
              "0",
              "kill-" + commandId);
      try {
        killer.getOutputStream().close();
        int code = killer.waitFor();
        if (code != 0 && !killer.containerGone()) {
          LOG.log(
              System.Logger.Level.WARNING,
              "sandbox docker:{0}: killing command {1} ended with {2}: a process may be left",
              id,
              commandId,
              code);
        }
      } finally {
        killer.release();
      }
    } catch (DockerException | WorkspaceException | java.io.IOException e) {
      // the container or its daemon is gone (nothing left to kill), or the kill could not start:
      // said, so that a command left running is never a silent mystery
      LOG.log(
          System.Logger.Level.WARNING,
          "sandbox docker:{0}: cannot kill command {1}: {2}",
          id,
          commandId,
          e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // nobody interrupts this thread
    }
  }

  private WorkspaceUnavailableException gone(Exception cause) {
    Optional<WorkspaceUnavailableException> ended = sandboxes.endedByATimer(id);
    if (ended.isPresent()) {
      return ended.get();
    }
    return new WorkspaceUnavailableException(
        "sandbox docker:"
            + id
            + " is gone (destroyed, its container removed, or its Docker daemon unreachable)"
            + (cause == null ? "" : ": " + cause.getMessage()),
        cause);
  }
}
