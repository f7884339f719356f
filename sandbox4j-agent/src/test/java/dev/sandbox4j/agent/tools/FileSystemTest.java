package dev.sandbox4j.agent.tools;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** FileSystem's tools on a host workspace: their output formats and error messages. */
class FileSystemTest {

  @TempDir Path root;
  ToolFixture tools;
  Path dir;
  FileSystem fs = FileSystem.create();

  @BeforeEach
  void setUp() {
    tools = new ToolFixture(HostWorkspaceProvider.create(root).newBackend());
    dir = Path.of(tools.workspace.workingDirectory());
  }

  private Path file(String name, String content) throws Exception {
    Path path = dir.resolve(name);
    Files.createDirectories(path.getParent());
    Files.writeString(path, content);
    return path;
  }

  private String read(String argsJson) throws Exception {
    return tools.call(fs, "read_file", argsJson);
  }

  private static String hashOf(String readOutput) {
    Matcher m = Pattern.compile("hash:([0-9a-f]{12})").matcher(readOutput);
    assertThat(m.find()).isTrue();
    return m.group(1);
  }

  // --- read_file ------------------------------------------------------------------------------

  @Test
  void readFileNumbersLinesUnderAHeader() throws Exception {
    file("a.txt", "alpha\nbeta\n");
    String out = read("{\"path\": \"a.txt\"}");
    assertThat(out)
        .matches("\\[a\\.txt \\| 2 lines \\| hash:[0-9a-f]{12}]\n     1\talpha\n     2\tbeta\n");
  }

  @Test
  void readFileTakesAZeroBasedOffsetAndALimitAndSaysHowToContinue() throws Exception {
    file("n.txt", IntStream.rangeClosed(1, 10).mapToObj(i -> "line" + i).collect(joining()));
    String out = read("{\"path\": \"n.txt\", \"offset\": 2, \"limit\": 3}");
    assertThat(out.substring(out.indexOf('\n') + 1))
        .isEqualTo(
            "     3\tline3\n     4\tline4\n     5\tline5\n"
                + "... (5 more lines. Use offset=5 to continue reading.)\n");
    assertThat(tools.error(fs, "read_file", "{\"path\": \"n.txt\", \"offset\": 10}"))
        .isEqualTo("Offset 10 exceeds file length (10 lines).");
    assertThat(tools.error(fs, "read_file", "{\"path\": \"n.txt\", \"offset\": -1}"))
        .startsWith("offset must be 0 or more");
  }

  @Test
  void readFileStopsAtTheLineCapAndTheCharCap() throws Exception {
    file("big.txt", IntStream.rangeClosed(1, 2500).mapToObj(i -> "x" + i).collect(joining()));
    String out = read("{\"path\": \"big.txt\"}");
    assertThat(out).contains("  2000\tx2000\n").doesNotContain("x2001");
    assertThat(out).endsWith("... (500 more lines. Use offset=2000 to continue reading.)\n");

    file("wide.txt", ("y".repeat(999) + "\n").repeat(100));
    String wide = read("{\"path\": \"wide.txt\"}");
    assertThat(wide.length()).isLessThanOrEqualTo(50_000);
    Matcher m =
        Pattern.compile("\\.\\.\\. \\((\\d+) more lines\\. Use offset=(\\d+)").matcher(wide);
    assertThat(m.find()).isTrue();
    assertThat(Integer.parseInt(m.group(1)) + Integer.parseInt(m.group(2))).isEqualTo(100);
    assertThat(wide)
        .contains("    " + m.group(2) + "\t")
        .doesNotContain(String.format("%6d\t", Integer.parseInt(m.group(2)) + 1));
  }

  @Test
  void readFileReportsBinaryEmptyMissingAndDirectories() throws Exception {
    Files.write(dir.resolve("b.bin"), new byte[] {1, 2, 0, 3});
    assertThat(read("{\"path\": \"b.bin\"}"))
        .isEqualTo(
            "[Binary file: 4 bytes. Use a binary-aware command (e.g. xxd, file, od) to inspect it.]");
    file("empty.txt", "");
    assertThat(read("{\"path\": \"empty.txt\"}"))
        .endsWith(" | 0 lines | hash:e3b0c44298fc]\n(empty file)\n");
    assertThat(tools.error(fs, "read_file", "{\"path\": \"nope.txt\"}"))
        .isEqualTo("File not found: nope.txt.");
    Files.createDirectory(dir.resolve("sub"));
    assertThat(tools.error(fs, "read_file", "{\"path\": \"sub\"}"))
        .isEqualTo("'sub' is a directory, not a file. Use list_directory to see its entries.");
  }

  // --- write_file / edit_file -------------------------------------------------------------------

  @Test
  void writeFileCreatesParentsAndReportsTheHashReadFileReports() throws Exception {
    String out =
        tools.call(
            fs, "write_file", "{\"path\": \"new/dir/f.txt\", \"content\": \"one\\ntwo\\n\"}");
    assertThat(out)
        .matches("Wrote 8 chars \\(2 lines\\) to new/dir/f\\.txt\\. \\[hash:[0-9a-f]{12}]");
    assertThat(Files.readString(dir.resolve("new/dir/f.txt"))).isEqualTo("one\ntwo\n");
    assertThat(hashOf(read("{\"path\": \"new/dir/f.txt\"}"))).isEqualTo(hashOf(out));
  }

  @Test
  void aStaleHashRefusesTheWriteAndAFreshOneAllowsIt() throws Exception {
    file("c.txt", "v1\n");
    String hash = hashOf(read("{\"path\": \"c.txt\"}"));
    file("c.txt", "v2 (changed by someone else)\n");
    String error =
        tools.error(
            fs,
            "write_file",
            "{\"path\": \"c.txt\", \"content\": \"mine\", \"expected_hash\": \"" + hash + "\"}");
    assertThat(error)
        .startsWith("Conflict: file 'c.txt' has changed (expected hash:" + hash + ", got hash:")
        .endsWith("). Re-read the file and retry. Nothing was changed.");
    assertThat(Files.readString(dir.resolve("c.txt"))).isEqualTo("v2 (changed by someone else)\n");
    assertThat(
            tools.error(
                fs,
                "edit_file",
                "{\"path\": \"c.txt\", \"old_text\": \"v2\", \"new_text\": \"v3\","
                    + " \"expected_hash\": \""
                    + hash
                    + "\"}"))
        .startsWith("Conflict: file 'c.txt' has changed");

    String fresh = hashOf(read("{\"path\": \"c.txt\"}"));
    assertThat(
            tools.call(
                fs,
                "write_file",
                "{\"path\": \"c.txt\", \"content\": \"mine\", \"expected_hash\": \""
                    + fresh
                    + "\"}"))
        .startsWith("Wrote 4 chars (1 lines) to c.txt.");
    assertThat(Files.readString(dir.resolve("c.txt"))).isEqualTo("mine");
  }

  @Test
  void editFileReplacesExactlyOneMatch() throws Exception {
    file("e.py", "def f():\n    return 1\n");
    String hash = hashOf(read("{\"path\": \"e.py\"}"));
    String out =
        tools.call(
            fs,
            "edit_file",
            "{\"path\": \"e.py\", \"old_text\": \"return 1\", \"new_text\": \"return 2\","
                + " \"expected_hash\": \""
                + hash
                + "\"}");
    assertThat(out).matches("Edited e\\.py\\. \\[hash:[0-9a-f]{12}]");
    assertThat(Files.readString(dir.resolve("e.py"))).isEqualTo("def f():\n    return 2\n");
    assertThat(hashOf(out)).isEqualTo(hashOf(read("{\"path\": \"e.py\"}")));
  }

  @Test
  void editFileExplainsAMissAndShowsTheClosestLine() throws Exception {
    file("m.py", "def total(items):\n    return sum(items)\n");
    String error =
        tools.error(
            fs,
            "edit_file",
            "{\"path\": \"m.py\", \"old_text\": \"return sum(item)\", \"new_text\": \"x\"}");
    assertThat(error)
        .isEqualTo(
            "old_text not found in m.py. The closest line to the start of old_text is line 2:"
                + " '    return sum(items)'. Re-read the file with read_file and copy old_text"
                + " exactly as it is now. Nothing was changed.");
    String spacing =
        tools.error(
            fs,
            "edit_file",
            "{\"path\": \"m.py\", \"old_text\": \"def total(items):\\n  return sum(items)\","
                + " \"new_text\": \"x\"}");
    assertThat(spacing)
        .contains("old_text matches when whitespace is ignored (from line 1): copy the exact");
    assertThat(Files.readString(dir.resolve("m.py")))
        .isEqualTo("def total(items):\n    return sum(items)\n");
  }

  @Test
  void editFileRefusesAnAmbiguousMatchUnlessReplaceAll() throws Exception {
    file("d.txt", "a = 1\nb = 1\nc = 2\n");
    String error =
        tools.error(
            fs, "edit_file", "{\"path\": \"d.txt\", \"old_text\": \"= 1\", \"new_text\": \"= 9\"}");
    assertThat(error)
        .isEqualTo(
            "old_text found 2 times in d.txt (at lines 1, 2). Include more surrounding context to"
                + " make the match unique, or set replace_all to true to replace every"
                + " occurrence. Nothing was changed.");
    String out =
        tools.call(
            fs,
            "edit_file",
            "{\"path\": \"d.txt\", \"old_text\": \"= 1\", \"new_text\": \"= 9\","
                + " \"replace_all\": true}");
    assertThat(out).startsWith("Edited d.txt (2 replacements). [hash:");
    assertThat(Files.readString(dir.resolve("d.txt"))).isEqualTo("a = 9\nb = 9\nc = 2\n");
    assertThat(
            tools.error(
                fs,
                "edit_file",
                "{\"path\": \"gone.txt\", \"old_text\": \"a\", \"new_text\": \"b\"}"))
        .isEqualTo(
            "File not found: gone.txt. edit_file changes an existing file; use write_file to"
                + " create one.");
  }

  // --- policy: read-only patterns, root ---------------------------------------------------------

  @Test
  void readOnlyPatternsAllowReadsAndRefuseWrites() throws Exception {
    file(".env", "SECRET=1\n");
    file(".git/config", "[core]\n");
    file("certs/server.pem", "---\n");
    file("src/.env.local", "X=1\n");
    assertThat(read("{\"path\": \".env\"}")).contains("SECRET=1");
    assertThat(tools.error(fs, "write_file", "{\"path\": \".env\", \"content\": \"x\"}"))
        .isEqualTo(
            "Path '.env' is read-only (it matches '**/.env*'): it may be read but not written,"
                + " edited or created. Nothing was changed.");
    assertThat(
            tools.error(
                fs,
                "edit_file",
                "{\"path\": \".git/config\", \"old_text\": \"core\", \"new_text\": \"x\"}"))
        .contains("matches '**/.git/**'");
    assertThat(tools.error(fs, "write_file", "{\"path\": \"certs/server.pem\", \"content\": \"\"}"))
        .contains("matches '*.pem'");
    assertThat(tools.error(fs, "write_file", "{\"path\": \"src/.env.local\", \"content\": \"\"}"))
        .contains("read-only");
    assertThat(tools.error(fs, "create_directory", "{\"path\": \".git/hooks\"}"))
        .contains("read-only");
    assertThat(Files.readString(dir.resolve(".env"))).isEqualTo("SECRET=1\n");

    FileSystem open = FileSystem.builder().readOnlyPatterns(List.of()).build();
    assertThat(tools.call(open, "write_file", "{\"path\": \".env\", \"content\": \"x\"}"))
        .startsWith("Wrote 1 chars");
  }

  @Test
  void pathsOutsideTheRootAreRefused() throws Exception {
    String escape = tools.error(fs, "read_file", "{\"path\": \"../x\"}");
    assertThat(escape)
        .isEqualTo(
            "Path '../x' resolves outside the root directory ("
                + dir
                + "), which is as far as the file tools reach. Use a path inside it, relative to"
                + " the working directory ("
                + dir
                + ").");
    assertThat(tools.error(fs, "read_file", "{\"path\": \"/etc/passwd\"}"))
        .startsWith("Path '/etc/passwd' resolves outside the root directory");
    assertThat(tools.error(fs, "write_file", "{\"path\": \"a/../../x\", \"content\": \"\"}"))
        .contains("resolves outside the root directory");
    Files.createSymbolicLink(dir.resolve("link"), Path.of("/etc"));
    assertThat(tools.error(fs, "read_file", "{\"path\": \"link/hostname\"}"))
        .startsWith("Path 'link/hostname' resolves outside the root directory");
    assertThat(tools.error(fs, "list_directory", "{\"path\": \"..\"}"))
        .contains("resolves outside the root directory");

    FileSystem whole = FileSystem.builder().rootDir("/").build();
    assertThat(tools.call(whole, "read_file", "{\"path\": \"/etc/passwd\"}"))
        .startsWith("[/etc/passwd | ")
        .contains("root:");
  }

  // --- list_directory, find_files, create_directory, file_info
  // -------------------------------------

  @Test
  void listDirectoryShowsTypesAndSizesAndSkipsHiddenEntries() throws Exception {
    file("b.txt", "hello");
    file("a/inner.txt", "x");
    file(".hidden", "x");
    Files.createSymbolicLink(dir.resolve("l"), Path.of("b.txt"));
    assertThat(tools.call(fs, "list_directory", "{}"))
        .isEqualTo("a/\nb.txt  (5 bytes)\nl  (symlink)");
    assertThat(tools.call(fs, "list_directory", "{\"path\": \"a\"}"))
        .isEqualTo("a/inner.txt  (1 bytes)");
    Files.createDirectory(dir.resolve("empty"));
    assertThat(tools.call(fs, "list_directory", "{\"path\": \"empty\"}"))
        .isEqualTo("(empty directory)");
    assertThat(tools.error(fs, "list_directory", "{\"path\": \"b.txt\"}"))
        .isEqualTo("Not a directory: b.txt. Use read_file or file_info for a file.");
  }

  @Test
  void findFilesMatchesGlobsWithDoubleStar() throws Exception {
    file("top.py", "");
    file("src/a.py", "");
    file("src/deep/b.py", "");
    file("src/c.txt", "");
    file(".venv/lib/x.py", "");
    assertThat(tools.call(fs, "find_files", "{\"pattern\": \"*.py\"}")).isEqualTo("top.py");
    assertThat(tools.call(fs, "find_files", "{\"pattern\": \"**/*.py\"}"))
        .isEqualTo("src/a.py\nsrc/deep/b.py\ntop.py");
    assertThat(tools.call(fs, "find_files", "{\"pattern\": \"**/*.py\", \"path\": \"src\"}"))
        .isEqualTo("src/a.py\nsrc/deep/b.py");
    assertThat(tools.call(fs, "find_files", "{\"pattern\": \"src/*\"}"))
        .isEqualTo("src/a.py\nsrc/c.txt\nsrc/deep/");
    assertThat(tools.call(fs, "find_files", "{\"pattern\": \"*.rs\"}"))
        .isEqualTo("No matches found.");
    assertThat(tools.error(fs, "find_files", "{\"pattern\": \"/etc/*\"}"))
        .startsWith("Pattern '/etc/*' must be relative to the search path");
  }

  @Test
  void createDirectoryAndFileInfo() throws Exception {
    assertThat(tools.call(fs, "create_directory", "{\"path\": \"x/y\"}"))
        .isEqualTo("Created directory: x/y");
    assertThat(dir.resolve("x/y")).isDirectory();
    file("info.txt", "a\nb\n");
    String info = tools.call(fs, "file_info", "{\"path\": \"info.txt\"}");
    assertThat(info)
        .startsWith("path: info.txt\ntype: file\nsize: 4 bytes\npermissions: 0")
        .contains("\nbinary: false\nlines: 2\nhash: ");
    assertThat(tools.call(fs, "file_info", "{\"path\": \"x\"}"))
        .startsWith("path: x\ntype: directory\n");
  }

  // --- grep -------------------------------------------------------------------------------------

  static void writeGrepTree(Workspace ws) {
    ws.writeText("src/app.py", "import os\n\ndef main():\n    print('TODO fix')\n");
    ws.writeText("src/pkg/util.py", "# todo: later\nx = 1\n");
    ws.writeText("README.md", "TODO: docs\n");
    ws.writeText(".git/notes", "TODO hidden\n");
    ws.writeBytes("src/blob.bin", "TODO\0binary".getBytes(StandardCharsets.UTF_8));
  }

  /** The grep formats, whichever engine ran: shared by the host fallback and the rg test. */
  static void assertGrepFormats(ToolFixture tools, FileSystem fs) throws Exception {
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"TODO\"}"))
        .isEqualTo("README.md:1:TODO: docs\nsrc/app.py:4:    print('TODO fix')");
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"todo\", \"ignore_case\": true}"))
        .isEqualTo(
            "README.md:1:TODO: docs\nsrc/app.py:4:    print('TODO fix')\nsrc/pkg/util.py:1:# todo:"
                + " later");
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"def main\", \"context\": 1}"))
        .isEqualTo("src/app.py-2-\nsrc/app.py:3:def main():\nsrc/app.py-4-    print('TODO fix')");
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"TODO\", \"glob\": \"*.py\"}"))
        .isEqualTo("src/app.py:4:    print('TODO fix')");
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"x = \", \"path\": \"src/pkg\"}"))
        .isEqualTo("src/pkg/util.py:2:x = 1");
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"import\", \"path\": \"src/app.py\"}"))
        .isEqualTo("src/app.py:1:import os");
    assertThat(tools.call(fs, "grep", "{\"pattern\": \"nothing-here\"}"))
        .isEqualTo("No matches found.");
    assertThat(tools.error(fs, "grep", "{\"pattern\": \"(unclosed\"}"))
        .startsWith("The search failed: ")
        .endsWith("Check the regular expression and the path.");
    assertThat(tools.error(fs, "grep", "{\"pattern\": \"x\", \"path\": \"../\"}"))
        .contains("resolves outside the root directory");
  }

  @Test
  void grepFallsBackToGrepWhenForced() throws Exception {
    writeGrepTree(tools.workspace);
    assertGrepFormats(tools, FileSystem.builder().ripgrep(false).build());
  }

  @Test
  void grepFallsBackToGrepWhenTheWorkspaceHasNoRipgrep() throws Exception {
    writeGrepTree(tools.workspace);
    // a workspace whose PATH has grep but no rg
    Path bin = Files.createDirectories(root.resolve("bin-no-rg"));
    for (String tool : List.of("grep", "sh", "cat")) {
      Path found = Path.of("/usr/bin", tool);
      Files.createSymbolicLink(
          bin.resolve(tool), Files.exists(found) ? found : Path.of("/bin", tool));
    }
    ToolFixture noRg =
        new ToolFixture(
            HostWorkspaceProvider.builder()
                .root(root.resolve("ws"))
                .env("PATH", bin.toString())
                .build()
                .newBackend());
    writeGrepTree(noRg.workspace);
    assertGrepFormats(noRg, fs);
  }

  @Test
  void grepCapsItsResults() throws Exception {
    file("many.txt", "hit\n".repeat(30));
    FileSystem small = FileSystem.builder().maxResults(10).ripgrep(false).build();
    String out = tools.call(small, "grep", "{\"pattern\": \"hit\"}");
    assertThat(out.lines()).hasSize(11);
    assertThat(out).endsWith("many.txt:10:hit\n[... truncated at 10 lines]");
  }

  private static java.util.stream.Collector<CharSequence, ?, String> joining() {
    return Collectors.joining("\n", "", "\n");
  }
}
