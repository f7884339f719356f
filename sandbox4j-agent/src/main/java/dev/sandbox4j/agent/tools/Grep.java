package dev.sandbox4j.agent.tools;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The grep tool's search, run in the workspace: ripgrep when it is there, {@code grep -r}
 * otherwise. Both print {@code path NUL line:text} (context {@code path NUL line-text}), so one
 * parser reads either; paths come back relative to the working directory.
 *
 * <p>The fallback differs from ripgrep in what it cannot do alike: it does not read {@code
 * .gitignore}, and its regular expressions are POSIX extended ones ({@code grep -E}), not Rust's.
 */
final class Grep {

  private static final Duration TIMEOUT = Duration.ofSeconds(120);
  private static final long OUTPUT_LIMIT = 8L * 1024 * 1024;
  private static final int MAX_COLUMNS = 4096;
  private static final int MISSING = 127;
  private static final String MISSING_MARKER = "sandbox4j: program not found: ";

  /** Runs "$@" in "$1", or exits 127 with a marker when the program is missing. */
  private static final String LAUNCHER =
      "cd -- \"$1\" || exit 2; shift; command -v \"$1\" > /dev/null 2>&1 || { echo \""
          + MISSING_MARKER
          + "$1\" >&2; exit "
          + MISSING
          + "; }; exec \"$@\"";

  private final boolean ripgrep;
  private final int maxResults;

  Grep(boolean ripgrep, int maxResults) {
    this.ripgrep = ripgrep;
    this.maxResults = maxResults;
  }

  private record Run(List<String> records, boolean cut, int exitCode, String stderr) {
    boolean missing() {
      return exitCode == MISSING && stderr.contains(MISSING_MARKER);
    }
  }

  private record Match(String path, String line) {}

  String search(
      Workspace ws,
      FileTools.Target target,
      boolean directory,
      String pattern,
      String glob,
      boolean ignoreCase,
      int context) {
    String cwd = directory ? target.real() : parent(target.real());
    String operand = directory ? "." : "./" + target.real().substring(cwd.length() + 1);
    if (cwd.equals("/") && !directory) {
      operand = "." + target.real();
    }
    Run run = null;
    boolean sorted = false;
    if (ripgrep) {
      List<String> rg =
          new ArrayList<>(
              List.of(
                  "rg",
                  "--null",
                  "--color=never",
                  "--no-heading",
                  "--line-number",
                  "--with-filename",
                  "--sort",
                  "path",
                  "--max-columns",
                  Integer.toString(MAX_COLUMNS),
                  "--max-columns-preview",
                  "--context",
                  Integer.toString(context)));
      if (glob != null && !glob.isBlank()) {
        rg.addAll(List.of("--glob", glob));
      }
      if (ignoreCase) {
        rg.add("--ignore-case");
      }
      rg.addAll(List.of("--regexp", pattern, "--", operand));
      run = run(ws, cwd, rg);
      sorted = !run.missing();
      if (run.missing()) {
        run = null;
      }
    }
    Glob filter = null;
    if (run == null) {
      List<String> grep =
          new ArrayList<>(List.of("grep", "-r", "-n", "-H", "-I", "-Z", "-E", "-C", "" + context));
      if (ignoreCase) {
        grep.add("-i");
      }
      grep.addAll(List.of("-e", pattern));
      if (directory) {
        // no operand: grep -r then searches "." itself, which --exclude-dir=.* would skip
        grep.addAll(List.of("--exclude=.*", "--exclude-dir=.*"));
      } else {
        grep.addAll(List.of("--", operand));
      }
      run = run(ws, cwd, grep);
      if (run.missing()) {
        throw new ToolError(
            "Neither rg nor grep is installed in the workspace; search with another command.");
      }
      if (glob != null && !glob.isBlank()) {
        filter = Glob.nameAnywhere(glob);
      }
    }
    List<Match> matches = new ArrayList<>();
    for (String record : run.records()) {
      int nul = record.indexOf('\0');
      if (nul < 0) {
        continue; // a "--" group separator, or a line cut by the output limit
      }
      String path = record.substring(0, nul);
      while (path.startsWith("./")) {
        path = path.substring(2);
      }
      if (hidden(path) || (filter != null && !filter.matches(path))) {
        continue;
      }
      String rest = record.substring(nul + 1);
      int digits = 0;
      while (digits < rest.length() && Character.isDigit(rest.charAt(digits))) {
        digits++;
      }
      if (digits == 0 || digits == rest.length()) {
        continue;
      }
      String absolute = cwd.equals("/") ? "/" + path : cwd + "/" + path;
      String shown = FileTools.display(ws, absolute);
      matches.add(new Match(shown, shown + rest.charAt(digits) + rest));
    }
    if (!sorted) {
      matches.sort(Comparator.comparing(Match::path)); // stable: lines stay in file order
    }
    if (matches.isEmpty() && run.exitCode() >= 2) {
      String detail = run.stderr().strip();
      throw new ToolError(
          "The search failed: "
              + (detail.isEmpty() ? "exit code " + run.exitCode() : detail)
              + ". Check the regular expression and the path.");
    }
    List<String> out = new ArrayList<>();
    for (Match match : matches) {
      if (out.size() >= maxResults) {
        out.add("[... truncated at " + maxResults + " lines]");
        return String.join("\n", out);
      }
      out.add(match.line());
    }
    if (run.cut()) {
      out.add("[... truncated: the search printed more than " + OUTPUT_LIMIT + " bytes]");
    }
    return out.isEmpty() ? "No matches found." : String.join("\n", out);
  }

  private static Run run(Workspace ws, String cwd, List<String> argv) {
    List<String> command = new ArrayList<>(List.of("/bin/sh", "-c", LAUNCHER, "sh", cwd));
    command.addAll(argv);
    RunOptions options = RunOptions.builder().timeout(TIMEOUT).outputLimit(OUTPUT_LIMIT).build();
    try {
      CommandResult result = ws.run(Command.argv(command), options);
      return new Run(records(result.stdoutText()), false, result.exitCode(), result.stderrText());
    } catch (WorkspaceOutputLimitException e) {
      List<String> records = records(e.stdoutHeadText());
      if (!records.isEmpty()) {
        records.removeLast(); // probably cut in the middle
      }
      return new Run(records, true, 0, e.stderrHeadText());
    } catch (WorkspaceTimeoutException e) {
      throw new ToolError(
          "The search timed out after "
              + ToolOutputs.seconds(e.timeout())
              + "; narrow `path` or add a `glob`.");
    }
  }

  private static List<String> records(String stdout) {
    List<String> records = new ArrayList<>(List.of(stdout.split("\n", -1)));
    if (!records.isEmpty() && records.getLast().isEmpty()) {
      records.removeLast();
    }
    return records;
  }

  private static boolean hidden(String relativePath) {
    for (String part : relativePath.split("/")) {
      if (part.startsWith(".") && !part.equals(".")) {
        return true;
      }
    }
    return false;
  }

  private static String parent(String path) {
    int slash = path.lastIndexOf('/');
    return slash <= 0 ? "/" : path.substring(0, slash);
  }
}
