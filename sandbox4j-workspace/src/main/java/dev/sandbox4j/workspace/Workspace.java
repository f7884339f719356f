package dev.sandbox4j.workspace;

import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The workspace as tools see it: commands and files in one environment, whatever backend holds it.
 *
 * <p>Relative paths resolve against the {@link #workingDirectory() working directory}. A backend
 * without native files but with commands gets a file system built from commands. Thread-safe if the
 * backend is (every Sandbox4j backend is).
 *
 * <p>{@link #readOnly()} gives a view that refuses every write and every command with {@link
 * WorkspaceReadOnlyException}: a policy for tools, not isolation.
 *
 * <p>Every command and file operation runs in an OpenTelemetry span ({@code sandbox4j.exec}, {@code
 * sandbox4j.file.read}, ...), a child of the caller's current span, with the workspace's provider
 * and id, the program name and exit code of a command, the path of a file, and the type of an
 * error; commands also feed {@code sandbox4j.exec.duration}. Through {@link
 * SandboxTelemetry#global()} unless {@link #withOpenTelemetry} says otherwise; a no-op until an SDK
 * is installed.
 */
public final class Workspace {

  /** Linux's PATH_MAX: no path longer than this can name a file. */
  private static final int MAX_PATH_LENGTH = 4096;

  private final WorkspaceBackend backend;
  private final SupportsFileSystem files;
  private final boolean readOnly;
  private final SandboxTelemetry telemetry;

  private Workspace(
      WorkspaceBackend backend,
      SupportsFileSystem files,
      boolean readOnly,
      SandboxTelemetry telemetry) {
    this.backend = backend;
    this.files = files;
    this.readOnly = readOnly;
    this.telemetry = telemetry;
  }

  /** A workspace over {@code backend}. Does no I/O. */
  public static Workspace of(WorkspaceBackend backend) {
    Objects.requireNonNull(backend, "backend");
    SupportsFileSystem files =
        switch (backend) {
          case SupportsFileSystem native_ -> native_;
          case SupportsCommands commands -> new CommandFileSystem(backend, commands);
          default -> null;
        };
    return new Workspace(backend, files, false, SandboxTelemetry.global());
  }

  /** A view of this workspace that refuses writes and commands. */
  public Workspace readOnly() {
    return readOnly ? this : new Workspace(backend, files, true, telemetry);
  }

  /**
   * The same workspace, its operations traced and measured through {@code openTelemetry} instead of
   * the global OpenTelemetry. Does no I/O.
   */
  public Workspace withOpenTelemetry(OpenTelemetry openTelemetry) {
    return new Workspace(backend, files, readOnly, SandboxTelemetry.of(openTelemetry));
  }

  /** Whether this view refuses writes and commands. */
  public boolean isReadOnly() {
    return readOnly;
  }

  /** The backend this workspace runs on. */
  public WorkspaceBackend backend() {
    return backend;
  }

  /** The ref, or empty while the workspace has not been created yet. Does no I/O. */
  public Optional<WorkspaceRef> ref() {
    return backend.ref();
  }

  /** Creates or attaches to the workspace now, if it has not happened yet, and returns its ref. */
  public WorkspaceRef open() {
    backend.workingDirectory();
    return backend
        .ref()
        .orElseThrow(() -> new IllegalStateException(backend + " has no ref after creation"));
  }

  /** The absolute, canonical working directory. Creates or attaches to the workspace. */
  public String workingDirectory() {
    return backend.workingDirectory();
  }

  /** Whether the backend runs commands (a read-only view still says true, and refuses them). */
  public boolean supportsCommands() {
    return backend instanceof SupportsCommands;
  }

  /** Whether files can be read and written (natively or through commands). */
  public boolean supportsFiles() {
    return files != null;
  }

  /**
   * Resolves {@code path} against the working directory: an absolute path is kept, a relative one
   * is appended; empty and {@code .} components and trailing slashes are dropped. {@code ..} is
   * kept for the backend to resolve as the kernel does (through symlinks), never lexically.
   *
   * @throws IllegalArgumentException if the path is null, contains NUL, or is longer than 4096
   *     characters
   */
  public String resolve(String path) {
    if (path == null) {
      throw new IllegalArgumentException("path must not be null");
    }
    if (path.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("path contains NUL: " + path.replace("\0", "\\0"));
    }
    if (path.length() > MAX_PATH_LENGTH) {
      throw new IllegalArgumentException(
          "path is longer than "
              + MAX_PATH_LENGTH
              + " characters: "
              + path.substring(0, 80)
              + "...");
    }
    String joined = path.startsWith("/") ? path : workingDirectory() + "/" + path;
    StringBuilder out = new StringBuilder();
    for (String part : joined.split("/")) {
      if (part.isEmpty() || part.equals(".")) {
        continue;
      }
      out.append('/').append(part);
    }
    return out.isEmpty() ? "/" : out.toString();
  }

  /** Runs a command with default options. See {@link SupportsCommands#run}. */
  public CommandResult run(Command command) {
    return run(command, RunOptions.defaults());
  }

  /** Runs a command. See {@link SupportsCommands#run}. */
  public CommandResult run(Command command, RunOptions options) {
    Objects.requireNonNull(command, "command");
    Objects.requireNonNull(options, "options");
    if (readOnly) {
      throw new WorkspaceReadOnlyException("the workspace is read-only: commands are not allowed");
    }
    if (options.keepStdinOpen()) {
      throw new IllegalArgumentException(
          "keepStdinOpen is for Workspace.start: nothing could write to the stdin of a command that"
              + " run() waits for");
    }
    if (!(backend instanceof SupportsCommands commands)) {
      throw new UnsupportedOperationException(backend.getClass().getName() + " runs no commands");
    }
    Span span = telemetry.tracer().spanBuilder("sandbox4j.exec").startSpan();
    if (span.isRecording()) {
      // the program only: arguments and environment may hold secrets
      span.setAttribute(SandboxTelemetry.PROCESS_COMMAND, program(command));
    }
    long start = System.nanoTime();
    boolean ok = false;
    try (Scope ignored = span.makeCurrent()) {
      CommandResult result = commands.run(command, options);
      ok = true;
      if (span.isRecording()) {
        span.setAttribute(SandboxTelemetry.PROCESS_EXIT_CODE, result.exitCode());
      }
      return result;
    } catch (RuntimeException | Error e) {
      SandboxTelemetry.recordFailure(span, e);
      throw e;
    } finally {
      long nanos = System.nanoTime() - start;
      Optional<WorkspaceRef> ref = backend.ref();
      endSpan(span, ref);
      telemetry.recordExec(ref.map(WorkspaceRef::provider).orElse("unknown"), ok, nanos);
    }
  }

  /** What a command's span names: the program of an argv, {@code sh} for a shell string. */
  private static String program(Command command) {
    return switch (command) {
      case Command.Argv argv -> argv.args().getFirst();
      case Command.Shell shell -> "sh";
    };
  }

  private <T> T traced(String name, String path, String targetPath, Supplier<T> body) {
    Span span = telemetry.tracer().spanBuilder(name).startSpan();
    if (span.isRecording()) {
      span.setAttribute(SandboxTelemetry.FILE_PATH, path);
      if (targetPath != null) {
        span.setAttribute(SandboxTelemetry.FILE_TARGET_PATH, targetPath);
      }
    }
    try (Scope ignored = span.makeCurrent()) {
      return body.get();
    } catch (RuntimeException | Error e) {
      SandboxTelemetry.recordFailure(span, e);
      throw e;
    } finally {
      endSpan(span, span.isRecording() ? backend.ref() : Optional.empty());
    }
  }

  private void traced(String name, String path, Runnable body) {
    traced(
        name,
        path,
        null,
        () -> {
          body.run();
          return null;
        });
  }

  private static void endSpan(Span span, Optional<WorkspaceRef> ref) {
    if (span.isRecording() && ref.isPresent()) {
      // set at the end: the operation may be the one that created the workspace
      span.setAttribute(SandboxTelemetry.WORKSPACE_PROVIDER, ref.get().provider());
      span.setAttribute(SandboxTelemetry.WORKSPACE_ID, ref.get().id());
    }
    span.end();
  }

  /**
   * Starts a command in the background and returns at once (after creating or attaching to the
   * workspace). See {@link BackgroundCommand}.
   */
  public BackgroundCommand start(Command command, RunOptions options) {
    Objects.requireNonNull(command, "command");
    Objects.requireNonNull(options, "options");
    if (readOnly) {
      throw new WorkspaceReadOnlyException("the workspace is read-only: commands are not allowed");
    }
    return BackgroundCommand.start(this, command, options);
  }

  /** Opens a file for reading. See {@link SupportsFileSystem#openRead}. */
  public InputStream openRead(String path) {
    String resolved = resolve(path);
    return traced("sandbox4j.file.open", resolved, null, () -> files().openRead(resolved));
  }

  /** Reads a whole file. */
  public byte[] readBytes(String path) {
    String resolved = resolve(path);
    return traced("sandbox4j.file.read", resolved, null, () -> files().readBytes(resolved));
  }

  /** Reads a whole file as UTF-8 text, invalid sequences replaced by U+FFFD. */
  public String readText(String path) {
    return Texts.decode(readBytes(path));
  }

  /** Writes a file from a stream. See {@link SupportsFileSystem#write}. */
  public void write(String path, InputStream content) {
    Objects.requireNonNull(content, "content");
    checkWritable("write", path);
    String resolved = resolve(path);
    traced("sandbox4j.file.write", resolved, () -> files().write(resolved, content));
  }

  /** Writes a whole file. See {@link SupportsFileSystem#write}. */
  public void writeBytes(String path, byte[] content) {
    Objects.requireNonNull(content, "content");
    checkWritable("write", path);
    String resolved = resolve(path);
    traced("sandbox4j.file.write", resolved, () -> files().writeBytes(resolved, content));
  }

  /** Writes a whole file as UTF-8. */
  public void writeText(String path, String text) {
    Objects.requireNonNull(text, "text");
    writeBytes(path, text.getBytes(StandardCharsets.UTF_8));
  }

  /** Metadata, following symlinks. */
  public FileStat stat(String path) {
    String resolved = resolve(path);
    return traced("sandbox4j.file.stat", resolved, null, () -> files().stat(resolved));
  }

  /** Whether something exists at {@code path}, following symlinks. */
  public boolean exists(String path) {
    String resolved = resolve(path);
    return traced("sandbox4j.file.exists", resolved, null, () -> files().exists(resolved));
  }

  /** The entries of a directory, sorted by name; symlinks not followed. */
  public List<DirectoryEntry> list(String path) {
    String resolved = resolve(path);
    return traced("sandbox4j.file.list", resolved, null, () -> files().list(resolved));
  }

  /** {@code mkdir -p}. */
  public void createDirectories(String path) {
    checkWritable("create directory", path);
    String resolved = resolve(path);
    traced("sandbox4j.file.mkdirs", resolved, () -> files().createDirectories(resolved));
  }

  /** Removes a file, symlink or empty directory. */
  public void remove(String path) {
    remove(path, false);
  }

  /** Removes a file, symlink or directory, recursively on request. */
  public void remove(String path, boolean recursive) {
    checkWritable("remove", path);
    String resolved = resolve(path);
    traced("sandbox4j.file.remove", resolved, () -> files().remove(resolved, recursive));
  }

  /** Renames with {@code rename(2)} semantics. */
  public void rename(String from, String to) {
    checkWritable("rename", from);
    String source = resolve(from);
    String target = resolve(to);
    traced(
        "sandbox4j.file.rename",
        source,
        target,
        () -> {
          files().rename(source, target);
          return null;
        });
  }

  /**
   * The canonical path, symlinks resolved inside the workspace ({@code realpath -m}). Uses the
   * backend's own resolution, or {@code realpath -m} run as a command.
   */
  public String realpath(String path) {
    String resolved = resolve(path);
    return traced(
        "sandbox4j.file.realpath",
        resolved,
        null,
        () ->
            switch (backend) {
              case SupportsRealpath r -> r.realpath(resolved);
              case SupportsCommands c -> CommandFileSystem.realpath(c, resolved);
              default ->
                  throw new UnsupportedOperationException(
                      backend.getClass().getName() + " cannot resolve paths");
            });
  }

  private SupportsFileSystem files() {
    if (files == null) {
      throw new UnsupportedOperationException(
          backend.getClass().getName() + " has neither files nor commands");
    }
    return files;
  }

  private void checkWritable(String operation, String path) {
    if (readOnly) {
      throw new WorkspaceReadOnlyException(
          "the workspace is read-only: cannot " + operation + " " + path);
    }
  }

  @Override
  public String toString() {
    return "Workspace[" + backend.ref().map(WorkspaceRef::toString).orElse("not created") + "]";
  }
}
