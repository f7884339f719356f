package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.spi.MarkedTrees;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import io.grpc.StatusRuntimeException;
import java.io.InputStream;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * One Modal sandbox: created on first use (or attached to by ref), then reached through its task's
 * command router (the provider's, shared by its backends of the sandbox). Commands are execs
 * wrapped in a shell that puts a marker into the environment of everything the command starts
 * ({@link #MARKER}); Modal cannot kill an exec, so a kill is a second exec that stops and kills
 * every process carrying the marker, and their descendants ({@link #KILL_TREE}). Files go through
 * Modal's filesystem calls where it has them, else through commands ({@link ModalFiles}). State:
 * {@code id}, {@code router}, {@code files} and {@code workingDirectory} are set once, under {@code
 * this}.
 */
final class ModalWorkspace implements WorkspaceBackend, SupportsCommands, SupportsFileSystem {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final System.Logger LOG = System.getLogger(ModalWorkspace.class.getName());

  /** The variable that marks every process of one command: {@code SANDBOX4J_COMMAND=<id>}. */
  static final String MARKER = "SANDBOX4J_COMMAND";

  /**
   * Runs {@code "$@"} with the marker exported: it is inherited by every process the command
   * starts, those that call {@code setsid} or daemonize included (only one that clears its
   * environment loses it; its descendants are still found by their parent).
   */
  static final String WRAPPER =
      """
      SANDBOX4J_COMMAND=$0
      export SANDBOX4J_COMMAND
      exec "$@"
      """;

  /**
   * Stops, then kills, every process whose environment holds {@code SANDBOX4J_COMMAND=$1}, and
   * every descendant of one: stopped first, so that none forks while the tree is walked. POSIX sh,
   * {@code tr} and {@code grep} only.
   */
  static final String KILL_TREE =
      MarkedTrees.killScript(MarkedTrees.MarkerIn.ENVIRON, MARKER + "=");

  /**
   * Prints the canonical working directory; creates it first on a new sandbox ({@code $2} = 1), as
   * the seed does for a configured one.
   */
  private static final String WORKING_DIRECTORY =
      """
      if [ -n "$1" ]; then
        if [ "$2" = 1 ]; then mkdir -p -- "$1" || exit 3; fi
        cd -- "$1" || exit 3
      fi
      pwd -P
      """;

  private final ModalSandbox sandboxes;
  private final String attachId;
  private String id;
  private CommandRouter router;
  private ModalFiles files;
  private String workingDirectory;

  ModalWorkspace(ModalSandbox sandboxes, String attachId) {
    this.sandboxes = sandboxes;
    this.attachId = attachId;
    this.id = attachId;
  }

  @Override
  public synchronized Optional<WorkspaceRef> ref() {
    return Optional.ofNullable(id).map(i -> new WorkspaceRef(ModalSandbox.NAME, i));
  }

  @Override
  public String workingDirectory() {
    return acquire();
  }

  /** Creates the sandbox or checks the attached one runs, then finds its working directory. */
  private synchronized String acquire() {
    if (workingDirectory != null) {
      return workingDirectory;
    }
    boolean fresh = attachId == null;
    if (fresh && id == null) {
      sandboxes.beforeCreate().run();
      id = sandboxes.create();
    } else if (!fresh) {
      sandboxes.requireRunning(id);
    }
    if (router == null) {
      try {
        router = sandboxes.router(id);
      } catch (WorkspaceUnavailableException e) {
        if (!fresh) {
          throw e;
        }
        // a sandbox that never started is a failure to say why, not one that went away
        throw new WorkspaceException(
            "Modal could not start sandbox " + id + ": " + e.getMessage(), e);
      }
    }
    if (files == null) {
      String sandbox = id;
      files =
          new ModalFiles(
              sandboxes.control(),
              router.taskId(),
              SupportsFileSystem.fromCommands(this, this),
              this,
              (what, e) ->
                  sandboxes.failureOf(
                      sandbox,
                      ModalErrors.translateForSandbox(what + " in " + sandbox, sandbox, e)));
    }
    // the default image's /root is for sandboxes this provider makes: an attached one (made by
    // another provider, maybe from another image) keeps its own unless one was set
    String configured =
        fresh ? sandboxes.workingDirectoryOption() : sandboxes.explicitWorkingDirectory();
    ModalExec exec =
        startExec(
            List.of(
                "/bin/sh",
                "-c",
                WORKING_DIRECTORY,
                "sh",
                configured == null ? "" : configured,
                fresh ? "1" : "0"),
            null,
            List.of());
    try {
      exec.getOutputStream().close();
      byte[] out = exec.getInputStream().readAllBytes();
      byte[] err = exec.getErrorStream().readAllBytes();
      int code = exec.waitFor();
      if (code != 0) {
        throw new WorkspaceException(
            "Modal sandbox "
                + id
                + ": cannot use the working directory "
                + configured
                + " (exit "
                + code
                + "): "
                + new String(err, java.nio.charset.StandardCharsets.UTF_8).strip());
      }
      String dir = new String(out, java.nio.charset.StandardCharsets.UTF_8).strip();
      if (!dir.startsWith("/")) {
        throw new WorkspaceException(
            "Modal sandbox " + id + ": unexpected working directory " + dir);
      }
      workingDirectory = dir;
      return dir;
    } catch (java.io.IOException e) {
      throw sandboxes.failureOf(id, new WorkspaceException("Modal sandbox " + id + ": " + e, e));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while opening " + id);
    } finally {
      exec.release();
    }
  }

  private synchronized CommandRouter router() {
    return router;
  }

  /** The sandbox's files, once it runs. */
  private ModalFiles files() {
    acquire();
    synchronized (this) {
      return files;
    }
  }

  @Override
  public InputStream openRead(String path) {
    return files().openRead(path);
  }

  @Override
  public void write(String path, InputStream content) {
    files().write(path, content);
  }

  @Override
  public FileStat stat(String path) {
    return files().stat(path);
  }

  @Override
  public boolean exists(String path) {
    return files().exists(path);
  }

  @Override
  public List<DirectoryEntry> list(String path) {
    return files().list(path);
  }

  @Override
  public void createDirectories(String path) {
    files().createDirectories(path);
  }

  @Override
  public void remove(String path, boolean recursive) {
    files().remove(path, recursive);
  }

  @Override
  public void rename(String from, String to) {
    files().rename(from, to);
  }

  private ModalExec startExec(List<String> argv, String workdir, List<String> secretIds) {
    try {
      return ModalExec.start(router(), argv, workdir, secretIds);
    } catch (StatusRuntimeException e) {
      throw sandboxes.failureOf(
          id, ModalErrors.translateForSandbox("starting a command in " + id, id, e));
    }
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    String dir = acquire();
    long clockStart = System.nanoTime();
    Map<String, String> env = new LinkedHashMap<>(sandboxes.envOption());
    env.putAll(options.env());
    List<String> secrets = env.isEmpty() ? List.of() : List.of(sandboxes.ephemeralSecret(env));
    String commandId = HexFormat.of().formatHex(randomBytes());
    List<String> argv = new ArrayList<>(List.of("/bin/sh", "-c", WRAPPER, commandId));
    argv.addAll(command.toArgv());
    ModalExec exec = startExec(argv, dir, secrets);
    try {
      CommandResult result =
          ProcessCommands.await(
              exec,
              exec.getInputStream(),
              exec.getErrorStream(),
              options,
              clockStart,
              () -> kill(commandId));
      if (exec.failure() != null) {
        throw sandboxes.failureOf(
            id,
            ModalErrors.translateForSandbox("waiting for a command in " + id, id, exec.failure()));
      }
      if (result.exitCode() == 137 && sandboxes.finished(id)) {
        // the seed: a command that exits 137 because its sandbox was terminated means "gone"
        throw new WorkspaceUnavailableException(
            "Modal sandbox " + id + " was terminated while the command ran");
      }
      return result;
    } catch (WorkspaceUnavailableException e) {
      throw e;
    } catch (WorkspaceException e) {
      throw sandboxes.failureOf(id, e);
    } finally {
      exec.release();
    }
  }

  private static byte[] randomBytes() {
    byte[] b = new byte[8];
    RANDOM.nextBytes(b);
    return b;
  }

  /**
   * Kills every process of command {@code commandId}, on a thread of its own which this one waits
   * for: the caller is often a thread being cancelled, and a gRPC call made on an interrupted
   * thread fails at once.
   */
  private void kill(String commandId) {
    Thread killing =
        Thread.ofVirtual()
            .name("sandbox4j-modal-kill-" + commandId)
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
    ModalExec killer;
    try {
      killer =
          ModalExec.start(
              router(),
              List.of("/bin/sh", "-c", KILL_TREE, "kill-tree", commandId),
              null,
              List.of());
    } catch (RuntimeException e) {
      LOG.log(
          System.Logger.Level.WARNING,
          "Modal sandbox {0}: cannot kill command {1}: {2}",
          id,
          commandId,
          e.toString());
      return;
    }
    try {
      killer.getOutputStream().close();
      if (!killer.onExit().isDone()) {
        killer.onExit().get(30, TimeUnit.SECONDS);
      }
      if (killer.exitValue() != 0) {
        LOG.log(
            System.Logger.Level.WARNING,
            "Modal sandbox {0}: killing command {1} ended with {2}: a process may be left",
            id,
            commandId,
            killer.exitValue());
      }
    } catch (Exception e) {
      LOG.log(
          System.Logger.Level.WARNING,
          "Modal sandbox {0}: killing command {1} failed: {2}",
          id,
          commandId,
          e.toString());
    } finally {
      killer.release();
    }
  }

  @Override
  public String toString() {
    return "ModalWorkspace[" + (id == null ? "not created" : id) + "]";
  }
}
