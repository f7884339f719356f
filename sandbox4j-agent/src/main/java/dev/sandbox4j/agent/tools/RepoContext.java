package dev.sandbox4j.agent.tools;

import dev.sandbox4j.agent.Capability;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceFileException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Loads the repository's instructions for coding agents — {@code CLAUDE.md} and {@code AGENTS.md}
 * in the workspace's working directory — into the run's instructions when the run starts, each as a
 * {@code <context-file path="...">} block. A file that is missing is skipped; one that is the same
 * file or has the same content as an earlier one is loaded once.
 *
 * <p>Reading the files at run start uses the workspace, so by default it <b>creates the sandbox</b>
 * (or attaches to the run's ref) before the first model request, even if the model never calls a
 * tool; a workspace that cannot be created fails the run there. With {@link Builder#lazy
 * lazy(true)} the files are loaded only when the workspace already exists when the run starts — the
 * run continues a history or was given a ref, or a backend that was already used — and a fresh run
 * creates nothing until a tool needs it (and then has no repository instructions).
 *
 * <p>Non-goals: no walk up to parent directories and no nested files, unlike the reference
 * harness's {@code RepoContext}. Immutable and thread-safe.
 */
public final class RepoContext implements Capability {

  /** The files loaded by default, in this order. */
  public static final List<String> DEFAULT_FILE_NAMES = List.of("CLAUDE.md", "AGENTS.md");

  /** Characters of one file put into the instructions; the rest is left for read_file. */
  static final int MAX_FILE_CHARS = 50_000;

  private final boolean lazy;
  private final List<String> fileNames;

  private RepoContext(Builder b) {
    this.lazy = b.lazy;
    this.fileNames = b.fileNames;
  }

  /** {@code CLAUDE.md} and {@code AGENTS.md}, loaded eagerly. */
  public static RepoContext create() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Whether this loads only from a workspace that already exists at run start. */
  public boolean isLazy() {
    return lazy;
  }

  @Override
  public String instructions(RunContext run) {
    if (lazy && run.workspaceRef().isEmpty()) {
      return "";
    }
    Workspace ws = run.workspace();
    Set<String> seenPaths = new HashSet<>();
    Set<String> seenContent = new HashSet<>();
    List<String> blocks = new ArrayList<>();
    for (String name : fileNames) {
      byte[] bytes;
      String real;
      try {
        if (!ws.exists(name) || !ws.stat(name).isFile()) {
          continue;
        }
        real = ws.realpath(name);
        bytes = ws.readBytes(name);
      } catch (WorkspaceFileException e) {
        continue; // unreadable: the model can still look for it
      }
      String content = new String(bytes, StandardCharsets.UTF_8);
      if (!seenPaths.add(real) || !seenContent.add(FileTools.hash(bytes))) {
        continue;
      }
      content = content.stripTrailing();
      if (content.length() > MAX_FILE_CHARS) {
        content =
            content.substring(0, MAX_FILE_CHARS)
                + "\n[... truncated at "
                + MAX_FILE_CHARS
                + " characters; read the rest with read_file]";
      }
      blocks.add("<context-file path=\"" + name + "\">\n" + content + "\n</context-file>");
    }
    return String.join("\n\n", blocks);
  }

  /** Options of a {@link RepoContext}. */
  public static final class Builder {
    private boolean lazy;
    private List<String> fileNames = DEFAULT_FILE_NAMES;

    private Builder() {}

    /**
     * Whether to load only from a workspace that already exists when the run starts (default false:
     * load always, creating the workspace).
     */
    public Builder lazy(boolean lazy) {
      this.lazy = lazy;
      return this;
    }

    /** The files to load from the working directory, in order. */
    public Builder fileNames(List<String> names) {
      for (String name : names) {
        Objects.requireNonNull(name, "file name");
        if (name.isBlank() || name.startsWith("/")) {
          throw new IllegalArgumentException(
              "file names are relative to the working directory, was '" + name + "'");
        }
      }
      this.fileNames = List.copyOf(names);
      return this;
    }

    public RepoContext build() {
      return new RepoContext(this);
    }
  }
}
