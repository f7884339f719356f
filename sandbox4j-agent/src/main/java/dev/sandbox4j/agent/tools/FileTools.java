package dev.sandbox4j.agent.tools;

import dev.sandbox4j.agent.ToolContext;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/** The file tools of {@link FileSystem} and {@link Coder}: paths, policy, formats. */
final class FileTools {

  /** Files larger than this are not read whole; the model reads a part with a command. */
  static final long MAX_FILE_BYTES = 10L * 1024 * 1024;

  /** Room kept under maxReadChars for the continuation notice. */
  private static final int NOTICE_CHARS = 200;

  /** Directories a find_files walk visits at most. */
  private static final int MAX_WALKED_DIRECTORIES = 20_000;

  private final String rootDir; // null: the working directory
  private final List<Glob> readOnly;
  private final int maxReadLines;
  private final int maxReadChars;
  private final int maxResults;
  private final Grep grep;

  FileTools(
      String rootDir,
      List<Glob> readOnly,
      int maxReadLines,
      int maxReadChars,
      int maxResults,
      boolean ripgrep) {
    this.rootDir = rootDir;
    this.readOnly = List.copyOf(readOnly);
    this.maxReadLines = maxReadLines;
    this.maxReadChars = maxReadChars;
    this.maxResults = maxResults;
    this.grep = new Grep(ripgrep, maxResults);
  }

  int maxReadLines() {
    return maxReadLines;
  }

  int maxReadChars() {
    return maxReadChars;
  }

  int maxResults() {
    return maxResults;
  }

  // --- paths ------------------------------------------------------------------------------------

  /**
   * A path the model named, resolved.
   *
   * @param given as the model wrote it
   * @param real canonical, symlinks resolved
   * @param relative {@code real} relative to the root ("" for the root itself)
   * @param display how the tools show it: relative to the working directory when inside it
   */
  record Target(String given, String real, String relative, String display) {}

  Target resolve(Workspace ws, String path) {
    String given = path == null || path.isBlank() ? "." : path;
    if (given.indexOf('\0') >= 0) {
      throw new ToolError("The path contains a NUL byte.");
    }
    String root = root(ws);
    String real;
    try {
      real = ws.realpath(given);
    } catch (IllegalArgumentException e) {
      throw new ToolError("Invalid path " + ToolOutputs.quote(given) + ": " + e.getMessage());
    } catch (WorkspaceFileException e) {
      throw new ToolError("Cannot resolve " + ToolOutputs.quote(given) + ": " + describe(e) + ".");
    }
    String relative = relativeTo(root, real);
    if (relative == null) {
      throw new ToolError(
          "Path "
              + ToolOutputs.quote(given)
              + " resolves outside the root directory ("
              + root
              + "), which is as far as the file tools reach. Use a path inside it, relative to"
              + " the working directory ("
              + ws.workingDirectory()
              + ").");
    }
    return new Target(given, real, relative, display(ws, real));
  }

  private String root(Workspace ws) {
    if (rootDir == null) {
      return ws.workingDirectory();
    }
    if (rootDir.equals("/")) {
      return "/";
    }
    return ws.realpath(rootDir);
  }

  /** {@code path} relative to {@code dir} ("" if equal), or null if it is not inside it. */
  static String relativeTo(String dir, String path) {
    if (path.equals(dir)) {
      return "";
    }
    String prefix = dir.equals("/") ? "/" : dir + "/";
    return path.startsWith(prefix) ? path.substring(prefix.length()) : null;
  }

  static String display(Workspace ws, String real) {
    String relative = relativeTo(ws.workingDirectory(), real);
    if (relative == null) {
      return real;
    }
    return relative.isEmpty() ? "." : relative;
  }

  private void checkWritable(Target target) {
    for (Glob glob : readOnly) {
      if (!target.relative().isEmpty() && glob.matches(target.relative())) {
        throw new ToolError(
            "Path "
                + ToolOutputs.quote(target.display())
                + " is read-only (it matches "
                + ToolOutputs.quote(glob.pattern())
                + "): it may be read but not written, edited or created. Nothing was changed.");
      }
    }
  }

  // --- read_file --------------------------------------------------------------------------------

  String readFile(ToolContext ctx, FileSystem.ReadFileArgs args) {
    Workspace ws = ctx.workspace();
    int offset = args.offset() == null ? 0 : args.offset();
    int limit = args.limit() == null ? maxReadLines : Math.min(args.limit(), maxReadLines);
    if (offset < 0) {
      throw new ToolError("offset must be 0 or more (it counts lines from 0), was " + offset + ".");
    }
    if (limit <= 0) {
      throw new ToolError("limit must be at least 1, was " + args.limit() + ".");
    }
    Target target = resolve(ws, args.path());
    byte[] bytes = readRegularFile(ws, target);
    if (isBinary(bytes)) {
      return "[Binary file: "
          + bytes.length
          + " bytes. Use a binary-aware command (e.g. xxd, file, od) to inspect it.]";
    }
    String text = decodeLenient(bytes);
    List<String> lines = lines(text);
    String header =
        "[" + target.display() + " | " + lines.size() + " lines | hash:" + hash(bytes) + "]\n";
    if (lines.isEmpty()) {
      return header + "(empty file)\n";
    }
    if (offset >= lines.size()) {
      throw new ToolError(
          "Offset " + offset + " exceeds file length (" + lines.size() + " lines).");
    }
    StringBuilder out = new StringBuilder(header);
    int budget = maxReadChars - header.length() - NOTICE_CHARS;
    int shown = 0;
    for (int i = offset; i < lines.size() && shown < limit; i++) {
      String rendered = String.format("%6d\t%s\n", i + 1, lines.get(i));
      if (rendered.length() > budget) {
        if (shown == 0) {
          return out.append("... (Line ")
              .append(i + 1)
              .append(" is ")
              .append(lines.get(i).length())
              .append(" characters and does not fit the read window. Use offset=")
              .append(i + 1)
              .append(" to skip it, or a shell command (e.g. cut -c, head -c) to inspect it.)\n")
              .toString();
        }
        break;
      }
      out.append(rendered);
      budget -= rendered.length();
      shown++;
    }
    int remaining = lines.size() - offset - shown;
    if (remaining > 0) {
      out.append("... (")
          .append(remaining)
          .append(" more lines. Use offset=")
          .append(offset + shown)
          .append(" to continue reading.)\n");
    }
    return out.toString();
  }

  private byte[] readRegularFile(Workspace ws, Target target) {
    FileStat stat = stat(ws, target);
    if (stat.isDirectory()) {
      throw new ToolError(
          ToolOutputs.quote(target.display())
              + " is a directory, not a file. Use list_directory to see its entries.");
    }
    if (!stat.isFile()) {
      throw new ToolError(
          ToolOutputs.quote(target.display())
              + " is not a regular file (a FIFO, socket or device); it cannot be read as text.");
    }
    if (stat.size() > MAX_FILE_BYTES) {
      throw new ToolError(
          "File "
              + ToolOutputs.quote(target.display())
              + " is "
              + stat.size()
              + " bytes, over the "
              + MAX_FILE_BYTES / (1024 * 1024)
              + " MiB limit of the file tools. Read the part you need with a shell command"
              + " instead (e.g. head, tail, sed -n '100,200p', or grep).");
    }
    try {
      return ws.readBytes(target.real());
    } catch (WorkspaceFileException e) {
      throw fileError(target, e);
    }
  }

  private static FileStat stat(Workspace ws, Target target) {
    try {
      return ws.stat(target.real());
    } catch (WorkspaceFileException e) {
      throw fileError(target, e);
    }
  }

  // --- write_file / edit_file -------------------------------------------------------------------

  String writeFile(ToolContext ctx, FileSystem.WriteFileArgs args) {
    Workspace ws = ctx.workspace();
    Target target = resolve(ws, args.path());
    checkWritable(target);
    if (ws.exists(target.real())) {
      FileStat stat = stat(ws, target);
      if (stat.isDirectory()) {
        throw new ToolError(
            ToolOutputs.quote(target.display()) + " is a directory; give a file path to write.");
      }
      if (args.expectedHash() != null) {
        checkHash(target, readRegularFile(ws, target), args.expectedHash());
      }
    }
    byte[] content = args.content().getBytes(StandardCharsets.UTF_8);
    write(ws, target, content);
    return "Wrote "
        + args.content().length()
        + " chars ("
        + lines(args.content()).size()
        + " lines) to "
        + target.display()
        + ". [hash:"
        + hash(content)
        + "]";
  }

  String editFile(ToolContext ctx, FileSystem.EditFileArgs args) {
    Workspace ws = ctx.workspace();
    Target target = resolve(ws, args.path());
    checkWritable(target);
    if (args.oldText().isEmpty()) {
      throw new ToolError(
          "old_text is empty: give the exact text to replace (use write_file to create a file).");
    }
    if (!ws.exists(target.real())) {
      throw new ToolError(
          "File not found: "
              + target.display()
              + ". edit_file changes an existing file; use write_file to create one.");
    }
    byte[] bytes = readRegularFile(ws, target);
    if (args.expectedHash() != null) {
      checkHash(target, bytes, args.expectedHash());
    }
    if (isBinary(bytes)) {
      throw new ToolError(
          ToolOutputs.quote(target.display()) + " is a binary file; edit_file edits text files.");
    }
    String text = decodeStrict(bytes, target);
    int count = count(text, args.oldText());
    boolean all = Boolean.TRUE.equals(args.replaceAll());
    if (count == 0) {
      throw new ToolError(
          "old_text not found in " + target.display() + ". " + EditHints.closest(text, args));
    }
    if (count > 1 && !all) {
      throw new ToolError(
          "old_text found "
              + count
              + " times in "
              + target.display()
              + " (at lines "
              + EditHints.lineNumbers(text, args.oldText(), 10)
              + "). Include more surrounding context to make the match unique, or set"
              + " replace_all to true to replace every occurrence. Nothing was changed.");
    }
    if (args.oldText().equals(args.newText())) {
      throw new ToolError("old_text and new_text are the same: the edit would change nothing.");
    }
    String edited =
        all
            ? text.replace(args.oldText(), args.newText())
            : replaceFirst(text, args.oldText(), args.newText());
    byte[] content = edited.getBytes(StandardCharsets.UTF_8);
    write(ws, target, content);
    return "Edited "
        + target.display()
        + (all ? " (" + count + (count == 1 ? " replacement" : " replacements") + ")" : "")
        + ". [hash:"
        + hash(content)
        + "]";
  }

  private static void checkHash(Target target, byte[] current, String expected) {
    String actual = hash(current);
    String wanted = expected.strip();
    if (wanted.startsWith("hash:")) {
      wanted = wanted.substring(5);
    }
    if (!actual.equalsIgnoreCase(wanted)) {
      throw new ToolError(
          "Conflict: file "
              + ToolOutputs.quote(target.display())
              + " has changed (expected hash:"
              + wanted
              + ", got hash:"
              + actual
              + "). Re-read the file and retry. Nothing was changed.");
    }
  }

  private static void write(Workspace ws, Target target, byte[] content) {
    try {
      ws.writeBytes(target.real(), content);
    } catch (WorkspaceFileException e) {
      throw fileError(target, e);
    }
  }

  private static String replaceFirst(String text, String old, String replacement) {
    int at = text.indexOf(old);
    return text.substring(0, at) + replacement + text.substring(at + old.length());
  }

  static int count(String text, String part) {
    int count = 0;
    for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + part.length())) {
      count++;
    }
    return count;
  }

  // --- list_directory / find_files --------------------------------------------------------------

  String listDirectory(ToolContext ctx, FileSystem.ListDirectoryArgs args) {
    Workspace ws = ctx.workspace();
    Target target = resolve(ws, args.path());
    List<DirectoryEntry> entries = list(ws, target);
    List<String> out = new ArrayList<>();
    String base = target.display().equals(".") ? "" : target.display() + "/";
    for (DirectoryEntry entry : entries) {
      if (entry.name().startsWith(".")) {
        continue;
      }
      if (out.size() >= maxResults) {
        out.add("[... truncated at " + maxResults + " entries]");
        break;
      }
      String name = base + entry.name();
      out.add(
          switch (entry.type()) {
            case DIRECTORY -> name + "/";
            case FILE -> name + "  (" + entry.size() + " bytes)";
            case SYMLINK -> name + "  (symlink)";
            case OTHER -> name + "  (special file)";
          });
    }
    return out.isEmpty() ? "(empty directory)" : String.join("\n", out);
  }

  private static List<DirectoryEntry> list(Workspace ws, Target target) {
    try {
      return ws.list(target.real());
    } catch (WorkspaceNotDirectoryException e) {
      throw new ToolError(
          "Not a directory: " + target.display() + ". Use read_file or file_info for a file.");
    } catch (WorkspaceFileException e) {
      throw fileError(target, e);
    }
  }

  String findFiles(ToolContext ctx, FileSystem.FindFilesArgs args) {
    Workspace ws = ctx.workspace();
    String pattern = args.pattern();
    if (pattern == null || pattern.isBlank()) {
      throw new ToolError("pattern is empty: give a glob such as '*.py' or '**/*.json'.");
    }
    if (pattern.startsWith("/")) {
      throw new ToolError(
          "Pattern "
              + ToolOutputs.quote(pattern)
              + " must be relative to the search path, not absolute; pass the directory as"
              + " `path`.");
    }
    Glob glob = Glob.anchored(pattern);
    Target start = resolve(ws, args.path());
    if (!stat(ws, start).isDirectory()) {
      throw new ToolError("Not a directory: " + start.display() + ".");
    }
    int maxDepth = glob.maxDepth();
    List<String> matches = new ArrayList<>();
    ArrayDeque<String> pending = new ArrayDeque<>(); // relative to start
    pending.add("");
    int walked = 0;
    boolean capped = false;
    walk:
    while (!pending.isEmpty()) {
      String dir = pending.pollFirst();
      if (++walked > MAX_WALKED_DIRECTORIES) {
        capped = true;
        break;
      }
      List<DirectoryEntry> entries;
      try {
        entries = ws.list(dir.isEmpty() ? start.real() : start.real() + "/" + dir);
      } catch (WorkspaceFileException e) {
        continue; // unreadable or vanished: skip it, as find does
      }
      List<String> subdirectories = new ArrayList<>();
      for (DirectoryEntry entry : entries) {
        if (entry.name().startsWith(".")) {
          continue;
        }
        String relative = dir.isEmpty() ? entry.name() : dir + "/" + entry.name();
        boolean directory = entry.type() == FileType.DIRECTORY;
        if (glob.matches(relative)) {
          if (matches.size() >= maxResults) {
            capped = true;
            break walk;
          }
          String shown = start.display().equals(".") ? relative : start.display() + "/" + relative;
          matches.add(directory ? shown + "/" : shown);
        }
        int depth = relative.split("/").length;
        if (directory && (maxDepth < 0 || depth < maxDepth)) {
          subdirectories.add(relative);
        }
      }
      pending.addAll(subdirectories);
    }
    matches.sort(String::compareTo);
    if (capped) {
      matches.add(
          walked > MAX_WALKED_DIRECTORIES
              ? "[... truncated: the search stopped after "
                  + MAX_WALKED_DIRECTORIES
                  + " directories; narrow `path` or the pattern]"
              : "[... truncated at " + maxResults + " matches]");
    }
    return matches.isEmpty() ? "No matches found." : String.join("\n", matches);
  }

  // --- grep
  // ---------------------------------------------------------------------------------------

  String grep(ToolContext ctx, FileSystem.GrepArgs args) {
    Workspace ws = ctx.workspace();
    if (args.pattern() == null || args.pattern().isEmpty()) {
      throw new ToolError("pattern is empty: give a regular expression to search for.");
    }
    int context = args.context() == null ? 0 : args.context();
    if (context < 0 || context > 20) {
      throw new ToolError("context must be between 0 and 20, was " + context + ".");
    }
    Target target = resolve(ws, args.path());
    FileStat stat = stat(ws, target);
    return grep.search(
        ws,
        target,
        stat.isDirectory(),
        args.pattern(),
        args.glob(),
        Boolean.TRUE.equals(args.ignoreCase()),
        context);
  }

  // --- create_directory / file_info
  // ---------------------------------------------------------------

  String createDirectory(ToolContext ctx, FileSystem.PathArgs args) {
    Workspace ws = ctx.workspace();
    Target target = resolve(ws, args.path());
    checkWritable(target);
    if (ws.exists(target.real()) && !stat(ws, target).isDirectory()) {
      throw new ToolError(
          "Path " + ToolOutputs.quote(target.display()) + " exists and is not a directory.");
    }
    try {
      ws.createDirectories(target.real());
    } catch (WorkspaceFileException e) {
      throw fileError(target, e);
    }
    return "Created directory: " + target.display();
  }

  String fileInfo(ToolContext ctx, FileSystem.PathArgs args) {
    Workspace ws = ctx.workspace();
    Target target = resolve(ws, args.path());
    FileStat stat = stat(ws, target);
    List<String> parts = new ArrayList<>();
    parts.add("path: " + target.display());
    parts.add(
        "type: "
            + switch (stat.type()) {
              case FILE -> "file";
              case DIRECTORY -> "directory";
              case SYMLINK -> "symlink";
              case OTHER -> "special file";
            });
    parts.add("size: " + stat.size() + " bytes");
    parts.add("permissions: " + String.format("%04o", stat.permissions()));
    parts.add("modified: " + stat.modified());
    if (stat.isFile() && stat.size() <= MAX_FILE_BYTES) {
      byte[] bytes = readRegularFile(ws, target);
      boolean binary = isBinary(bytes);
      parts.add("binary: " + binary);
      if (!binary) {
        parts.add("lines: " + lines(decodeLenient(bytes)).size());
      }
      parts.add("hash: " + hash(bytes));
    }
    String lexical = ws.resolve(target.given());
    if (!lexical.equals(target.real())) {
      parts.add("resolves_to: " + target.display());
    }
    return String.join("\n", parts);
  }

  // --- helpers
  // --------------------------------------------------------------------------------------

  static boolean isBinary(byte[] bytes) {
    int n = Math.min(bytes.length, 8192);
    for (int i = 0; i < n; i++) {
      if (bytes[i] == 0) {
        return true;
      }
    }
    return false;
  }

  /** The hash the tools report: the first 12 hex digits of the SHA-256 of the file's bytes. */
  static String hash(byte[] bytes) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(bytes);
      return HexFormat.of().formatHex(digest).substring(0, 12);
    } catch (NoSuchAlgorithmException e) {
      throw new AssertionError("every JDK has SHA-256", e);
    }
  }

  /** Lines split on \n only (as grep -n and editors count them), without a phantom last one. */
  static List<String> lines(String text) {
    if (text.isEmpty()) {
      return List.of();
    }
    List<String> lines = new ArrayList<>(List.of(text.split("\n", -1)));
    if (lines.getLast().isEmpty()) {
      lines.removeLast();
    }
    return lines;
  }

  private static String decodeLenient(byte[] bytes) {
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static String decodeStrict(byte[] bytes, Target target) {
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes))
          .toString();
    } catch (CharacterCodingException e) {
      throw new ToolError(
          ToolOutputs.quote(target.display())
              + " is not valid UTF-8 text, so edit_file cannot rewrite it without damage; change"
              + " it with a shell command (e.g. sed) instead.");
    }
  }

  private static ToolError fileError(Target target, WorkspaceFileException e) {
    return new ToolError(
        switch (e) {
          case WorkspaceNoSuchFileException n -> "File not found: " + target.display() + ".";
          case WorkspaceIsDirectoryException d ->
              ToolOutputs.quote(target.display()) + " is a directory, not a file.";
          case WorkspaceNotDirectoryException d ->
              "A parent of " + ToolOutputs.quote(target.display()) + " is not a directory.";
          case WorkspaceAccessDeniedException a ->
              "Permission denied: " + target.display() + " (the workspace user may not do this).";
          default -> describe(e) + ": " + target.display() + ".";
        });
  }

  private static String describe(RuntimeException e) {
    String message = e.getMessage();
    return message == null || message.isBlank() ? e.getClass().getSimpleName() : message;
  }
}
