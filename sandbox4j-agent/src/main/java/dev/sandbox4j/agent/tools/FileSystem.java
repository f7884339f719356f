package dev.sandbox4j.agent.tools;

import dev.sandbox4j.agent.Capability;
import dev.sandbox4j.agent.Param;
import dev.sandbox4j.agent.Tool;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Gives the model file tools in the run's workspace: {@code read_file}, {@code write_file}, {@code
 * edit_file}, {@code list_directory}, {@code find_files}, {@code grep}, {@code create_directory}
 * and {@code file_info}.
 *
 * <p>Paths are relative to the workspace's working directory (absolute ones are taken as they are).
 * The tools reach only the {@linkplain Builder#rootDir root directory} and below — the working
 * directory unless configured, {@code /} for the whole sandbox: a path that resolves outside it,
 * through {@code ..} or a symlink (resolved in the workspace with {@code realpath}), is refused.
 * Paths matching a {@linkplain Builder#readOnlyPatterns read-only pattern} ({@code .git}, {@code
 * .env} files, keys) can be read but not written. The walkers ({@code list_directory}, {@code
 * find_files}, {@code grep}) skip hidden files and directories.
 *
 * <p>{@code read_file} numbers lines ({@code cat -n} style), reads at most {@link
 * Builder#maxReadLines} lines and {@link Builder#maxReadChars} characters per call and says which
 * {@code offset} continues; it reports a binary file's size instead of its bytes, and a content
 * hash. Passing that hash as {@code expected_hash} to {@code write_file} or {@code edit_file}
 * refuses the write if the file changed since it was read (a check, then a write: it catches a
 * stale read, it is not a lock). {@code grep} runs ripgrep ({@code rg}) in the workspace, or {@code
 * grep -rn} where there is none.
 *
 * <p>A policy for the model's tools, not isolation: commands (from {@link Shell}) can still write
 * anywhere the workspace user can. Failures the model can fix (a missing file, an ambiguous edit, a
 * stale hash) come back as error results that say what to do. Tool names, arguments and output
 * follow Pydantic AI Harness's {@code FileSystem}, so prompts written for it work here. Immutable
 * and thread-safe.
 */
public final class FileSystem implements Capability {

  /** Every tool this capability can give, and the default set, in registration order. */
  public static final List<String> ALL_TOOLS =
      List.of(
          "read_file",
          "write_file",
          "edit_file",
          "list_directory",
          "find_files",
          "grep",
          "create_directory",
          "file_info");

  /** Paths that can be read but not written, unless configured otherwise. */
  public static final List<String> DEFAULT_READ_ONLY_PATTERNS =
      List.of("**/.git/**", "**/.env*", "*.pem", "*.key");

  private final FileTools files;
  private final List<Tool> tools;

  private FileSystem(Builder b) {
    this.files =
        new FileTools(
            b.rootDir,
            b.readOnlyPatterns.stream().map(Glob::nameAnywhere).toList(),
            b.maxReadLines,
            b.maxReadChars,
            b.maxResults,
            b.ripgrep);
    List<Tool> list = new ArrayList<>();
    for (String name : ALL_TOOLS) {
      if (b.tools.contains(name)) {
        list.add(tool(name));
      }
    }
    this.tools = List.copyOf(list);
  }

  /** The file tools with their defaults: the working directory as root, default patterns. */
  public static FileSystem create() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  @Override
  public List<Tool> tools() {
    return tools;
  }

  // --- tool arguments -------------------------------------------------------------------------

  record ReadFileArgs(
      @Param("File path, relative to the working directory.") String path,
      @Param(value = "Zero-based line offset to start reading from (default 0).", required = false)
          Integer offset,
      @Param(
              value = "Maximum number of lines to return (default and maximum 2000).",
              required = false)
          Integer limit) {}

  record WriteFileArgs(
      @Param("File path, relative to the working directory.") String path,
      @Param("The complete new content of the file.") String content,
      @Param(
              value =
                  "The hash read_file (or an earlier write/edit) reported: the write is refused if"
                      + " the file has changed since.",
              required = false)
          String expectedHash) {}

  record EditFileArgs(
      @Param("File path, relative to the working directory.") String path,
      @Param(
              "The exact text to replace, whitespace and indentation included; it must occur"
                  + " exactly once unless replace_all is true.")
          String oldText,
      @Param("The text to put in its place.") String newText,
      @Param(value = "Replace every occurrence instead of exactly one.", required = false)
          Boolean replaceAll,
      @Param(
              value =
                  "The hash read_file (or an earlier write/edit) reported: the edit is refused if"
                      + " the file has changed since.",
              required = false)
          String expectedHash) {}

  record PathArgs(@Param("Path, relative to the working directory.") String path) {}

  record ListDirectoryArgs(
      @Param(value = "Directory, relative to the working directory (default: .).", required = false)
          String path) {}

  record FindFilesArgs(
      @Param(
              "Glob pattern relative to `path`: * and ? stay within a directory, ** spans"
                  + " directories (e.g. '*.py', '**/*.json', 'src/**/test_*.py').")
          String pattern,
      @Param(value = "Directory to search in (default: .).", required = false) String path) {}

  record GrepArgs(
      @Param("Regular expression to search for (ripgrep syntax).") String pattern,
      @Param(value = "Directory or file to search (default: .).", required = false) String path,
      @Param(value = "Only search files matching this glob (e.g. '*.py').", required = false)
          String glob,
      @Param(value = "Match case-insensitively.", required = false) Boolean ignoreCase,
      @Param(value = "Lines of context to show around each match (0 to 20).", required = false)
          Integer context) {}

  private Tool tool(String name) {
    return switch (name) {
      case "read_file" ->
          Tool.of(
              "read_file",
              "Read a text file. The first line is a header [path | N lines | hash:H]; then each"
                  + " line with its number, right-aligned, and a tab (cat -n style; numbers start"
                  + " at 1, `offset` counts from 0). At most "
                  + files.maxReadLines()
                  + " lines and "
                  + files.maxReadChars()
                  + " characters per call: when more remain, the last line says which offset"
                  + " continues. Binary files are reported, not shown. Pass the hash as"
                  + " expected_hash to write_file or edit_file to make sure the file has not"
                  + " changed since.",
              ReadFileArgs.class,
              files::readFile);
      case "write_file" ->
          Tool.of(
              "write_file",
              "Create a file or replace its whole content (missing parent directories are"
                  + " created). Returns the new hash. Prefer edit_file to change part of an"
                  + " existing file.",
              WriteFileArgs.class,
              files::writeFile);
      case "edit_file" ->
          Tool.of(
              "edit_file",
              "Edit a file by exact string replacement: old_text must occur exactly once (include"
                  + " enough surrounding lines to make it unique), or set replace_all to replace"
                  + " every occurrence. Copy old_text from read_file's output without the line"
                  + " numbers. Returns the new hash.",
              EditFileArgs.class,
              files::editFile);
      case "list_directory" ->
          Tool.of(
              "list_directory",
              "List a directory's entries (not recursive), sorted: directories end with /, files"
                  + " show their size. Hidden entries are skipped.",
              ListDirectoryArgs.class,
              files::listDirectory);
      case "find_files" ->
          Tool.of(
              "find_files",
              "Find files and directories by name with a glob pattern (not a content search; use"
                  + " grep for that). Paths are relative to the working directory, directories end"
                  + " with /. Hidden files and directories are skipped.",
              FindFilesArgs.class,
              files::findFiles);
      case "grep" ->
          Tool.of(
              "grep",
              "Search file contents with a regular expression (ripgrep), skipping hidden files"
                  + " (and, with ripgrep, files ignored by .gitignore). Matches are `file:line:text`,"
                  + " context lines `file-line-text`, sorted by file. At most "
                  + files.maxResults()
                  + " lines.",
              GrepArgs.class,
              files::grep);
      case "create_directory" ->
          Tool.of(
              "create_directory",
              "Create a directory and any missing parents; an existing directory is fine.",
              PathArgs.class,
              files::createDirectory);
      case "file_info" ->
          Tool.of(
              "file_info",
              "Metadata of a file or directory: type, size, permissions, modification time, and"
                  + " for a file whether it is binary, its line count and hash.",
              PathArgs.class,
              files::fileInfo);
      default -> throw new IllegalArgumentException("unknown file tool " + name);
    };
  }

  /**
   * Options of a {@link FileSystem}. Defaults: every tool, the working directory as root, the
   * {@link #DEFAULT_READ_ONLY_PATTERNS}, 2,000 lines and 50,000 characters per read, 1,000 results
   * per listing or search, ripgrep when the workspace has it.
   */
  public static final class Builder {
    private String rootDir;
    private List<String> readOnlyPatterns = DEFAULT_READ_ONLY_PATTERNS;
    private int maxReadLines = 2000;
    private int maxReadChars = 50_000;
    private int maxResults = 1000;
    private boolean ripgrep = true;
    private Set<String> tools = new LinkedHashSet<>(ALL_TOOLS);

    private Builder() {}

    /**
     * The directory the tools may reach, with everything below it: relative to the working
     * directory, or absolute; {@code "/"} for the whole sandbox. Default: the working directory.
     */
    public Builder rootDir(String path) {
      Objects.requireNonNull(path, "path");
      if (path.isBlank() || path.indexOf('\0') >= 0) {
        throw new IllegalArgumentException("rootDir must be a path, was '" + path + "'");
      }
      this.rootDir = path;
      return this;
    }

    /**
     * Globs of paths (relative to the root) that can be read but not written: {@code *} stays in
     * one directory, {@code **} spans directories, and a pattern without {@code /} matches a file
     * name at any depth. Empty for none.
     */
    public Builder readOnlyPatterns(List<String> patterns) {
      this.readOnlyPatterns = List.copyOf(patterns);
      return this;
    }

    /** Most lines one read_file call returns. */
    public Builder maxReadLines(int lines) {
      this.maxReadLines = positive("maxReadLines", lines);
      return this;
    }

    /** Most characters of numbered lines one read_file call returns. */
    public Builder maxReadChars(int chars) {
      if (chars < 1000) {
        throw new IllegalArgumentException("maxReadChars must be at least 1000, was " + chars);
      }
      this.maxReadChars = chars;
      return this;
    }

    /** Most entries list_directory, find_files and grep return. */
    public Builder maxResults(int results) {
      this.maxResults = positive("maxResults", results);
      return this;
    }

    /**
     * Whether grep uses ripgrep when the workspace has {@code rg} (default); false always uses the
     * {@code grep -rn} fallback.
     */
    public Builder ripgrep(boolean use) {
      this.ripgrep = use;
      return this;
    }

    /**
     * Which tools to give, from {@link #ALL_TOOLS} (all by default).
     *
     * @throws IllegalArgumentException for an unknown or no name
     */
    public Builder tools(String... names) {
      Set<String> chosen = new LinkedHashSet<>(List.of(names));
      for (String name : chosen) {
        if (!ALL_TOOLS.contains(name)) {
          throw new IllegalArgumentException(
              "unknown file tool '" + name + "'; the tools are " + ALL_TOOLS);
        }
      }
      if (chosen.isEmpty()) {
        throw new IllegalArgumentException("a FileSystem needs at least one tool");
      }
      this.tools = chosen;
      return this;
    }

    public FileSystem build() {
      return new FileSystem(this);
    }

    private static int positive(String what, int value) {
      if (value <= 0) {
        throw new IllegalArgumentException(what + " must be positive, was " + value);
      }
      return value;
    }
  }
}
