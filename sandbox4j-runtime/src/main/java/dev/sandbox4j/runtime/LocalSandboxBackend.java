package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.EnginePorts;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.engine.SandboxFiles;
import dev.sandbox4j.runtime.internal.engine.SandboxIdentity;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.InputStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;

/**
 * One sandbox as a workspace backend. Files are read and written from the host by {@link
 * SandboxFiles} (system calls confined to the sandbox's root, with the sandbox user's permissions);
 * where that is not possible, by commands run in the sandbox as its user (the file system {@link
 * Workspace} builds from commands). Either way permissions are the sandbox user's and no path can
 * leave the sandbox's root.
 *
 * <p>State: {@code id} is null until the first operation creates the sandbox (new backend) or is
 * set from the ref (attached backend); {@code ready} becomes true once it is known to run; {@code
 * files} is made on first use after that. All are guarded by {@code this}; commands and file
 * operations run outside the lock.
 */
final class LocalSandboxBackend implements WorkspaceBackend, SupportsCommands, SupportsFileSystem {
  private final LocalSandbox settings;
  private String id;
  private boolean ready;
  private SandboxIdentity identity; // read from its record once it is known to run
  private SupportsFileSystem files;

  LocalSandboxBackend(LocalSandbox settings, String attachId) {
    this.settings = settings;
    this.id = attachId;
  }

  @Override
  public synchronized Optional<WorkspaceRef> ref() {
    return Optional.ofNullable(id).map(i -> new WorkspaceRef(LocalSandbox.NAME, i));
  }

  /**
   * The builder's working directory if it set one, else the sandbox's own ({@link
   * SandboxIdentity#workingDirectory()}: its image's, or {@code /home/sandbox}).
   */
  @Override
  public String workingDirectory() {
    open();
    return workingDirectoryOf(identity());
  }

  private String workingDirectoryOf(SandboxIdentity sandbox) {
    String set = settings.workingDirectory();
    return set != null ? set : sandbox.workingDirectory();
  }

  /** Who the sandbox runs as, from its record (opening it first). */
  synchronized SandboxIdentity identity() {
    open();
    return identity;
  }

  /**
   * Creates or attaches on first use; after that wakes the sandbox if someone suspended or stopped
   * it meanwhile (one read of its record when not). Returns the id.
   */
  private synchronized String open() {
    Engine engine = settings.engine();
    if (id == null) {
      settings.beforeCreate().run();
      id =
          settings
              .telemetry()
              .lifecycle(
                  "create",
                  LocalSandbox.NAME,
                  null,
                  () -> SandboxTelemetry.tagWorkspaceId(createOrClaim(engine)));
      identity = engine.record(id).identity();
      ready = true;
      Supervisor.ensureRunning(engine);
    } else if (!ready) {
      Timers.endIfDeadlinePassed(engine, id); // in case no supervisor ran (a reboot, say)
      Timers.touch(engine.dir(id)); // before waking: the supervisor must not suspend it again
      settings.checkNetworkAccess(id, "attach to");
      engine.attach(id);
      identity = engine.record(id).identity();
      checkWorkingDirectory(engine);
      ready = true;
      Supervisor.ensureRunning(engine);
    } else {
      Timers.touch(engine.dir(id));
      engine.wake(id);
    }
    return id;
  }

  /** A member of the warm pool, if there is one to claim, else a new sandbox. Returns its id. */
  private String createOrClaim(Engine engine) {
    return settings
        .warmPool()
        .flatMap(pool -> pool.claim(settings, dir -> Timers.write(dir, settings.timers())))
        .orElseGet(
            () ->
                engine.create(
                    settings.spec(),
                    settings.progress(),
                    EnginePorts.creatingWith(
                        settings.portToken(),
                        Timers.creatingWith(settings.timers(), Engine::prepareUpperLayer))));
  }

  private void checkWorkingDirectory(Engine engine) {
    String workingDirectory = workingDirectoryOf(identity);
    if (!engine.isDirectoryForUser(id, workingDirectory)) {
      throw new WorkspaceException(
          "the working directory "
              + workingDirectory
              + " does not exist in sandbox local:"
              + id
              + " (it is created only in a new sandbox)");
    }
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    String sandbox = open();
    long clockStart = System.nanoTime(); // the deadline counts from here, after acquisition
    Engine engine = settings.engine();
    CommandResult result;
    try {
      result =
          Exec.run(
              engine,
              sandbox,
              identity.user(),
              workingDirectoryOf(identity),
              env(options.env()),
              command.toArgv(),
              options,
              clockStart,
              settings.noOutputTimeout());
    } catch (WorkspaceException | CancellationException e) {
      if (!engine.isAlive(sandbox)) {
        throw destroyedWhileRunning(engine, sandbox, e);
      }
      throw e;
    } finally {
      Timers.touch(engine.dir(sandbox)); // a command that just ended is activity too
    }
    if (!engine.isAlive(sandbox)) {
      throw destroyedWhileRunning(engine, sandbox, null);
    }
    return result;
  }

  private static WorkspaceUnavailableException destroyedWhileRunning(
      Engine engine, String sandbox, RuntimeException cause) {
    WorkspaceUnavailableException ended = Timers.ended(engine.home(), sandbox).orElse(null);
    String message =
        ended != null
            ? ended.getMessage() + " while the command ran"
            : "sandbox local:" + sandbox + " was destroyed while the command ran";
    return new WorkspaceUnavailableException(message, cause);
  }

  // ---- files ------------------------------------------------------------------------------

  /** The sandbox's file system: native if this JVM can, else made of commands. */
  private SupportsFileSystem files() {
    String sandbox = open();
    synchronized (this) {
      if (files == null) {
        // running a script never comes back to the file system, so this backend serves as both
        SupportsFileSystem commands = SupportsFileSystem.fromCommands(this, this);
        files =
            SandboxFiles.usable()
                ? new SandboxFiles(
                    settings.engine(), sandbox, workingDirectoryOf(identity), commands)
                : commands;
      }
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

  /**
   * The sandbox's own env (its identity's: the base and its image's {@code Env}, then its egress
   * proxy's), then the configured env, then the command's. Once open.
   */
  private Map<String, String> env(Map<String, String> commandEnv) {
    Map<String, String> env;
    synchronized (this) {
      env = new LinkedHashMap<>(identity.envMap());
    }
    Engine engine = settings.engine();
    env.putAll(engine.networks().proxyEnv(engine.dir(ref().orElseThrow().id())));
    env.putAll(settings.env());
    env.putAll(commandEnv);
    return env;
  }

  @Override
  public String toString() {
    return "LocalSandboxBackend[" + ref().map(WorkspaceRef::toString).orElse("not created") + "]";
  }
}
