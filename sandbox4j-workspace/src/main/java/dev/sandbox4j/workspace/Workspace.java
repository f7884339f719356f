package dev.sandbox4j.workspace;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The workspace as tools see it: commands and files in one environment, whatever backend holds it.
 *
 * <p>Relative paths resolve against the {@link #workingDirectory() working directory}. A backend
 * without native files but with commands gets a file system built from commands. Thread-safe if the
 * backend is (every Sandbox4j backend is).
 *
 * <p>{@link #readOnly()} gives a view that refuses every write and every command with {@link
 * WorkspaceReadOnlyException}: a policy for tools, not isolation.
 */
public final class Workspace {

  /** Linux's PATH_MAX: no path longer than this can name a file. */
  private static final int MAX_PATH_LENGTH = 4096;

  private final WorkspaceBackend backend;
  private final SupportsFileSystem files;
  private final boolean readOnly;

  private Workspace(WorkspaceBackend backend, SupportsFileSystem files, boolean readOnly) {
    this.backend = backend;
    this.files = files;
    this.readOnly = readOnly;
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
    return new Workspace(backend, files, false);
  }

  /** A view of this workspace that refuses writes and commands. */
  public Workspace readOnly() {
    return readOnly ? this : new Workspace(backend, files, true);
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
    return commands.run(command, options);
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
    return files().openRead(resolve(path));
  }

  /** Reads a whole file. */
  public byte[] readBytes(String path) {
    return files().readBytes(resolve(path));
  }

  /** Reads a whole file as UTF-8 text, invalid sequences replaced by U+FFFD. */
  public String readText(String path) {
    return Texts.decode(readBytes(path));
  }

  /** Writes a file from a stream. See {@link SupportsFileSystem#write}. */
  public void write(String path, InputStream content) {
    Objects.requireNonNull(content, "content");
    checkWritable("write", path);
    files().write(resolve(path), content);
  }

  /** Writes a whole file. See {@link SupportsFileSystem#write}. */
  public void writeBytes(String path, byte[] content) {
    Objects.requireNonNull(content, "content");
    checkWritable("write", path);
    files().writeBytes(resolve(path), content);
  }

  /** Writes a whole file as UTF-8. */
  public void writeText(String path, String text) {
    Objects.requireNonNull(text, "text");
    writeBytes(path, text.getBytes(StandardCharsets.UTF_8));
  }

  /** Metadata, following symlinks. */
  public FileStat stat(String path) {
    return files().stat(resolve(path));
  }

  /** Whether something exists at {@code path}, following symlinks. */
  public boolean exists(String path) {
    return files().exists(resolve(path));
  }

  /** The entries of a directory, sorted by name; symlinks not followed. */
  public List<DirectoryEntry> list(String path) {
    return files().list(resolve(path));
  }

  /** {@code mkdir -p}. */
  public void createDirectories(String path) {
    checkWritable("create directory", path);
    files().createDirectories(resolve(path));
  }

  /** Removes a file, symlink or empty directory. */
  public void remove(String path) {
    remove(path, false);
  }

  /** Removes a file, symlink or directory, recursively on request. */
  public void remove(String path, boolean recursive) {
    checkWritable("remove", path);
    files().remove(resolve(path), recursive);
  }

  /** Renames with {@code rename(2)} semantics. */
  public void rename(String from, String to) {
    checkWritable("rename", from);
    files().rename(resolve(from), resolve(to));
  }

  /**
   * The canonical path, symlinks resolved inside the workspace ({@code realpath -m}). Uses the
   * backend's own resolution, or {@code realpath -m} run as a command.
   */
  public String realpath(String path) {
    String resolved = resolve(path);
    return switch (backend) {
      case SupportsRealpath r -> r.realpath(resolved);
      case SupportsCommands c -> CommandFileSystem.realpath(c, resolved);
      default ->
          throw new UnsupportedOperationException(
              backend.getClass().getName() + " cannot resolve paths");
    };
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
