package dev.sandbox4j.workspace.host;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.SupportsRealpath;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;

/**
 * A workspace that is a directory on the host. <b>It isolates nothing</b>: see {@link
 * HostWorkspaceProvider}.
 *
 * <p>State: {@code ref} and {@code directory} are null until the first operation creates (new
 * backend) or checks (attached backend) the directory, then fixed (directory made canonical once it
 * is seen to exist); guarded by {@code this}.
 */
public final class HostWorkspace
    implements WorkspaceBackend, SupportsCommands, SupportsFileSystem, SupportsRealpath {

  private static final List<String> SETSID = findSetsid();
  private static final String DEFAULT_PATH =
      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

  private final HostWorkspaceProvider provider;
  private final String attachId;
  private WorkspaceRef ref;
  private Path directory;
  private boolean canonical;

  HostWorkspace(HostWorkspaceProvider provider, String attachId) {
    this.provider = provider;
    this.attachId = attachId;
    if (attachId != null) {
      this.ref = new WorkspaceRef(HostWorkspaceProvider.NAME, attachId);
    }
  }

  @Override
  public synchronized Optional<WorkspaceRef> ref() {
    return Optional.ofNullable(ref);
  }

  @Override
  public String workingDirectory() {
    return open().toString();
  }

  /** The workspace directory, created or checked on first use, and checked again each time. */
  private Path open() {
    Path dir;
    synchronized (this) {
      if (directory == null) {
        if (attachId == null) {
          String id = provider.createWorkspaceDirectory();
          ref = new WorkspaceRef(HostWorkspaceProvider.NAME, id);
          directory = provider.directoryOf(id);
        } else {
          directory = provider.directoryOf(attachId);
        }
      }
      if (!canonical) {
        try {
          directory = directory.toRealPath();
          canonical = true;
        } catch (IOException e) {
          throw gone();
        }
      }
      dir = directory;
    }
    if (!Files.isDirectory(dir)) {
      throw gone();
    }
    return dir;
  }

  private WorkspaceUnavailableException gone() {
    return new WorkspaceUnavailableException(
        "host workspace " + ref + " does not exist (destroyed, or never created here)");
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    Path dir = open();
    long clockStart = System.nanoTime();
    String marker = provider.markerPrefix(ref.id()) + HostWorkspaceProvider.newId();
    List<String> argv = new ArrayList<>(SETSID);
    argv.addAll(command.toArgv());
    ProcessBuilder builder = new ProcessBuilder(argv).directory(dir.toFile());
    buildEnvironment(builder.environment(), options.env(), marker);
    CommandResult result;
    try {
      result =
          ProcessCommands.run(
              builder,
              options,
              clockStart,
              process -> () -> ProcessTree.killAll(process.toHandle(), marker));
    } catch (IOException e) {
      if (!Files.isDirectory(dir)) {
        throw gone();
      }
      // Only without setsid does the JVM exec the program itself; report it as a shell would.
      String program = command.toArgv().getFirst();
      boolean missing = !program.contains("/") || !Files.exists(dir.resolve(program));
      String message = "sandbox4j: " + program + ": " + e.getMessage() + "\n";
      return new CommandResult(missing ? 127 : 126, new byte[0], message.getBytes());
    } catch (WorkspaceException | CancellationException e) {
      if (!Files.isDirectory(dir)) {
        throw new WorkspaceUnavailableException(
            "host workspace " + ref + " was destroyed while the command ran", e);
      }
      throw e;
    }
    if (!Files.isDirectory(dir)) {
      throw new WorkspaceUnavailableException(
          "host workspace " + ref + " was destroyed while the command ran");
    }
    return result;
  }

  private void buildEnvironment(
      Map<String, String> env, Map<String, String> commandEnv, String marker) {
    Map<String, String> host = Map.copyOf(env);
    env.clear();
    host.forEach(
        (name, value) -> {
          if (name.equals("PATH")
              || name.equals("HOME")
              || name.equals("LANG")
              || name.startsWith("LC_")) {
            env.put(name, value);
          }
        });
    env.putIfAbsent("PATH", DEFAULT_PATH);
    env.putAll(provider.env());
    env.putAll(commandEnv);
    env.put(ProcessTree.MARKER, marker);
  }

  @Override
  public InputStream openRead(String path) {
    open();
    return HostFiles.openRead(path);
  }

  @Override
  public void write(String path, InputStream content) {
    open();
    HostFiles.write(path, content);
  }

  @Override
  public FileStat stat(String path) {
    open();
    return HostFiles.stat(path);
  }

  @Override
  public List<DirectoryEntry> list(String path) {
    open();
    return HostFiles.list(path);
  }

  @Override
  public void createDirectories(String path) {
    open();
    HostFiles.createDirectories(path);
  }

  @Override
  public void remove(String path, boolean recursive) {
    HostFiles.remove(path, recursive, open());
  }

  @Override
  public void rename(String from, String to) {
    HostFiles.rename(from, to, open());
  }

  @Override
  public String realpath(String path) {
    open();
    return HostFiles.realpath(path);
  }

  @Override
  public String toString() {
    return "HostWorkspace[" + ref().map(WorkspaceRef::toString).orElse("not created") + "]";
  }

  /** {@code setsid} puts each command in its own session; without it commands share the JVM's. */
  private static List<String> findSetsid() {
    for (String candidate : List.of("/usr/bin/setsid", "/bin/setsid")) {
      if (Files.isExecutable(Path.of(candidate))) {
        return List.of(candidate);
      }
    }
    return List.of();
  }
}
