package dev.sandbox4j.agent.tools;

import dev.sandbox4j.agent.Capability;
import dev.sandbox4j.agent.ResponsePart;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Everything a coding agent needs, in the run's workspace: the file tools {@code read_file}, {@code
 * write_file}, {@code edit_file}, {@code list_directory}, {@code find_files} and {@code grep} (see
 * {@link FileSystem}); a {@code shell} tool that waits up to 270 s in the foreground or starts the
 * command in the background, with {@code check_command} and {@code stop_command} for the command's
 * ID (see {@link Shell}); coding guidance in the instructions; {@link RepoContext}; and a cap of
 * {@value #MAX_OUTPUT_CHARS} characters on every tool result (the start and the end are kept).
 *
 * {@snippet :
 * Agent agent = Agent.builder()
 *     .model("anthropic:claude-sonnet-4-5")
 *     .capability(WorkspaceCapability.of(new LocalSandbox()))
 *     .capability(Coder.create())
 *     .build();
 * }
 *
 * <p>The project directory is the workspace's working directory, and the file tools reach it and
 * below ({@link Builder#unrestrictedFileSystem} for the whole sandbox). Commands are not
 * restricted: the sandbox is the boundary. Because RepoContext reads {@code AGENTS.md} and {@code
 * CLAUDE.md} at run start, a run creates its sandbox before the first model request; {@code
 * Coder.builder().repoContext(false)} leaves RepoContext out and keeps creation lazy (until the
 * first tool call). Immutable and thread-safe.
 */
public final class Coder implements Capability {

  /** Characters kept of any tool result. */
  public static final int MAX_OUTPUT_CHARS = 64_000;

  /** Characters of lines one read_file returns, under the cap so that it never cuts a read. */
  static final int MAX_READ_CHARS = 60_000;

  static final String INSTRUCTIONS =
      """
      You are a coding agent working in a project through tools that act in its workspace (an \
      isolated machine). The working directory is the project.
      - Explore before changing: find_files and grep to locate code, read_file to read it.
      - Change files with edit_file (exact text, copied from read_file without the line numbers) \
      or write_file for new files and complete rewrites. Pass the hash read_file reports as \
      expected_hash when the file may have changed since you read it.
      - Run builds, tests and other commands with shell. A command that outlasts its wait keeps \
      running and returns an ID: use check_command and stop_command with it. Start servers and \
      watchers with background=true.
      - Check your work by running the relevant tests before you say you are done.""";

  private final FileSystem files;
  private final Shell shell;
  private final RepoContext repoContext; // null when left out
  private final String instructions;
  private final List<Tool> tools;

  private Coder(Builder b) {
    FileSystem.Builder fs =
        FileSystem.builder()
            .tools("read_file", "write_file", "edit_file", "list_directory", "find_files", "grep")
            .maxReadChars(MAX_READ_CHARS);
    if (b.unrestrictedFileSystem) {
      fs.rootDir("/").readOnlyPatterns(List.of());
    }
    this.files = fs.build();
    this.shell =
        Shell.builder()
            .tools("shell", "check_command", "stop_command")
            .defaultTimeout(Shell.MAX_FOREGROUND_WAIT)
            .build();
    this.repoContext = b.repoContext ? RepoContext.create() : null;
    this.instructions =
        b.instructions.isBlank() ? INSTRUCTIONS : INSTRUCTIONS + "\n\n" + b.instructions.strip();
    List<Tool> all = new ArrayList<>(files.tools());
    all.addAll(shell.tools());
    this.tools = List.copyOf(all);
  }

  /** A coder with RepoContext and the file tools confined to the working directory. */
  public static Coder create() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  @Override
  public List<Tool> tools() {
    return tools;
  }

  /** The coding guidance, any extra instructions, then the repository's instruction files. */
  @Override
  public String instructions(RunContext run) {
    String repo = repoContext == null ? "" : repoContext.instructions(run);
    return repo.isBlank() ? instructions : instructions + "\n\n" + repo;
  }

  @Override
  public void afterRun(RunContext run, RunResult result) {
    shell.afterRun(run, result);
  }

  @Override
  public RunResult onRunError(RunContext run, RuntimeException error) {
    return shell.onRunError(run, error);
  }

  /** Caps every tool result at {@value #MAX_OUTPUT_CHARS} characters, keeping both ends. */
  @Override
  public String afterToolCall(RunContext run, ResponsePart.ToolCall call, String output) {
    return ToolOutputs.truncateMiddle(output, MAX_OUTPUT_CHARS);
  }

  /** Options of a {@link Coder}. */
  public static final class Builder {
    private boolean repoContext = true;
    private boolean unrestrictedFileSystem;
    private String instructions = "";

    private Builder() {}

    /**
     * Whether to load {@code AGENTS.md}/{@code CLAUDE.md} at run start (default true), which
     * creates the sandbox then; false keeps workspace creation lazy.
     */
    public Builder repoContext(boolean load) {
      this.repoContext = load;
      return this;
    }

    /**
     * Whether the file tools reach the whole sandbox, with no read-only patterns (default false).
     */
    public Builder unrestrictedFileSystem(boolean unrestricted) {
      this.unrestrictedFileSystem = unrestricted;
      return this;
    }

    /** Instructions added after the default coding guidance. */
    public Builder instructions(String extra) {
      this.instructions = Objects.requireNonNull(extra, "instructions");
      return this;
    }

    public Coder build() {
      return new Coder(this);
    }
  }
}
