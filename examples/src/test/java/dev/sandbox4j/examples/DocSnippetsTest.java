package dev.sandbox4j.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The docs' code comes from the examples, which the build compiles and runs: a code block that
 * follows {@code <!-- snippet: examples/FILE#REGION -->} must be made of lines of that file's
 * region (between {@code [REGION]} and {@code [/REGION]} comments), in the same order. A block may
 * leave lines out (a test dependency, say) but can show nothing the example does not do.
 *
 * <p>Every Java block of the README and the user guide has such a marker, so that a new one cannot
 * drift from the code: a block that is deliberately not code (a listing of signatures, say) says so
 * and why with {@code <!-- not-code: REASON -->} instead. Keep those rare.
 */
class DocSnippetsTest {
  private static final Path REPO = Path.of("..").toAbsolutePath().normalize();
  private static final List<String> DOCS = List.of("README.md", "docs/user-guide.md");
  private static final Pattern SNIPPET =
      Pattern.compile("<!-- snippet: (examples/[^#\\s]+)#([a-z0-9-]+) -->");
  private static final Pattern NOT_CODE = Pattern.compile("<!-- not-code: \\S.* -->");

  /** The version this build makes, which every coordinate in the docs must name. */
  private static final String VERSION = System.getProperty("sandbox4j.version", "");

  /** A fenced block of a doc: its language, its lines, and the line just above its fence. */
  record Block(String doc, int line, String language, String above, String text) {
    String where() {
      return doc + ":" + line;
    }
  }

  @Test
  void everySnippetIsTakenFromAnExampleThatBuilds() throws IOException {
    List<String> checked = new ArrayList<>();
    for (Block block : blocks()) {
      Matcher m = SNIPPET.matcher(block.above());
      if (!m.matches()) {
        continue;
      }
      String where = block.where() + " → " + m.group(1) + "#" + m.group(2);
      List<String> region = region(REPO.resolve(m.group(1)), m.group(2), where);
      assertThat(missingFrom(region, lines(block.text())))
          .as("%s: these snippet lines are not in the example's region (in this order)", where)
          .isEmpty();
      checked.add(block.doc() + " → " + m.group(1) + "#" + m.group(2));
    }
    assertThat(checked)
        .as("the README and the user guide take their setup and API snippets from the examples")
        .anyMatch(s -> s.startsWith("README.md") && s.endsWith("#add-sandbox4j"))
        .anyMatch(s -> s.startsWith("docs/user-guide.md") && s.endsWith("#add-sandbox4j"))
        .anyMatch(s -> s.endsWith("#workspace-api"))
        .anyMatch(s -> s.endsWith("#agent"));
  }

  @Test
  void everyJavaBlockIsASnippetOrSaysWhyNot() throws IOException {
    List<String> unmarked = new ArrayList<>();
    for (Block block : blocks()) {
      unmarked.addAll(unmarked(block));
    }
    assertThat(unmarked)
        .as(
            "put <!-- snippet: examples/FILE#REGION --> right above each ```java block (the code in"
                + " an example's region), or <!-- not-code: REASON --> above one that is no code")
        .isEmpty();
  }

  @Test
  void aJavaBlockWithoutAMarkerIsReportedWithItsLine() {
    String doc =
        """
        Text.

        <!-- snippet: examples/a/A.java#a -->
        ```java
        a();
        ```

        ```java
        b();
        ```

        <!-- not-code: the builder's methods, listed -->
        ```java
        Builder cpus(int)
        ```

        <!-- not-code: -->
        ```java
        c();
        ```

        ```sh
        ls
        ```
        """;
    assertThat(blocks("guide.md", doc).stream().flatMap(b -> unmarked(b).stream()))
        .containsExactly("guide.md:8", "guide.md:18");
  }

  @Test
  void aSnippetLineThatIsNotInTheExampleIsReported() {
    List<String> region = List.of("a();", "b();", "c();");
    assertThat(missingFrom(region, List.of("a();", "c();"))).isEmpty();
    assertThat(missingFrom(region, List.of("c();", "a();"))).containsExactly("a();");
    assertThat(missingFrom(region, List.of("a();", "d();"))).containsExactly("d();");
  }

  /**
   * Gradle is not built here (no Gradle in CI), so its snippet is checked against the Maven one:
   * the same BOM at this build's version, the same modules, the same JVM flag.
   */
  @Test
  void theGradleSnippetAddsWhatTheMavenSnippetAdds() throws IOException {
    assertThat(VERSION).as("surefire passes the build's version").isNotEmpty();
    Block gradle =
        blocks().stream()
            .filter(b -> b.doc().equals("README.md") && b.language().equals("kotlin"))
            .findFirst()
            .orElseThrow(() -> new AssertionError("README.md has no Gradle (kotlin) block"));
    String maven =
        String.join(
            "\n",
            region(
                REPO.resolve("examples/workspace-local/pom.xml"),
                "add-sandbox4j",
                "the Maven snippet"));

    assertThat(gradle.text())
        .as("%s: Gradle imports the BOM of this build", gradle.where())
        .contains("implementation(platform(\"dev.sandbox4j:sandbox4j-bom:" + VERSION + "\"))");
    assertThat(maven)
        .as("the Maven snippet imports the BOM of this build")
        .contains("<artifactId>sandbox4j-bom</artifactId>", "<version>" + VERSION + "</version>");
    assertThat(all(Pattern.compile("implementation\\(\"dev\\.sandbox4j:([a-z0-9-]+)\"\\)"), gradle))
        .as("%s: the modules Gradle adds are the Maven snippet's", gradle.where())
        .isNotEmpty()
        .isEqualTo(
            all(
                Pattern.compile(
                    "<groupId>dev\\.sandbox4j</groupId>\\s*<artifactId>(sandbox4j-(?!bom)[a-z0-9-]+)"
                        + "</artifactId>"),
                new Block("pom.xml", 0, "xml", "", maven)));
    assertThat(gradle.text())
        .as("%s: Gradle's tests and runs get the JVM flag", gradle.where())
        .contains(
            "tasks.withType<Test> { jvmArgs(\"--enable-native-access=ALL-UNNAMED\") }",
            "tasks.withType<JavaExec> { jvmArgs(\"--enable-native-access=ALL-UNNAMED\") }");
  }

  /** A coordinate with a version anywhere in the docs ({@code dev.sandbox4j:*:0.1.0}) is ours. */
  @Test
  void everyVersionTheDocsNameIsThisBuilds() throws IOException {
    Pattern coordinate = Pattern.compile("dev\\.sandbox4j:[a-z0-9*-]+:([0-9][^\"`\\s)]*)");
    for (String doc : DOCS) {
      Matcher m = coordinate.matcher(Files.readString(REPO.resolve(doc)));
      while (m.find()) {
        assertThat(m.group(1)).as("%s: %s", doc, m.group()).isEqualTo(VERSION);
      }
    }
  }

  /** {@code block}'s place if it is a Java block without a marker, or with an empty reason. */
  static List<String> unmarked(Block block) {
    boolean marked =
        SNIPPET.matcher(block.above()).matches() || NOT_CODE.matcher(block.above()).matches();
    return block.language().equals("java") && !marked ? List.of(block.where()) : List.of();
  }

  private static List<Block> blocks() throws IOException {
    List<Block> all = new ArrayList<>();
    for (String doc : DOCS) {
      all.addAll(blocks(doc, Files.readString(REPO.resolve(doc))));
    }
    return all;
  }

  /** The fenced blocks of {@code text}, with the 1-based line of each opening fence. */
  static List<Block> blocks(String doc, String text) {
    List<String> lines = text.lines().toList();
    List<Block> blocks = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i);
      if (!line.startsWith("```")) {
        continue;
      }
      int open = i;
      int close = open + 1;
      while (close < lines.size() && !lines.get(close).equals("```")) {
        close++;
      }
      String above = open > 0 ? lines.get(open - 1).strip() : "";
      String body = String.join("\n", lines.subList(open + 1, Math.min(close, lines.size())));
      blocks.add(new Block(doc, open + 1, line.substring(3).strip(), above, body));
      i = close;
    }
    return blocks;
  }

  private static Set<String> all(Pattern pattern, Block block) {
    Set<String> found = new LinkedHashSet<>();
    Matcher m = pattern.matcher(block.text());
    while (m.find()) {
      found.add(m.group(1));
    }
    return found;
  }

  /** The snippet lines that do not follow, in order, in {@code region}. */
  static List<String> missingFrom(List<String> region, List<String> snippet) {
    List<String> missing = new ArrayList<>();
    int at = 0;
    for (String line : snippet) {
      int found = region.subList(at, region.size()).indexOf(line);
      if (found < 0) {
        missing.add(line);
      } else {
        at += found + 1;
      }
    }
    return missing;
  }

  private static List<String> region(Path file, String name, String where) throws IOException {
    List<String> all = lines(Files.readString(file));
    int start = indexOfMarker(all, "[" + name + "]");
    int end = indexOfMarker(all, "[/" + name + "]");
    assertThat(start).as("%s: no region marker [%s] in %s", where, name, file).isNotNegative();
    assertThat(end).as("%s: no end marker [/%s]", where, name).isGreaterThan(start);
    return all.subList(start + 1, end);
  }

  private static int indexOfMarker(List<String> lines, String marker) {
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i);
      if (line.equals("// " + marker) || line.equals("<!-- " + marker + " -->")) {
        return i;
      }
    }
    return -1;
  }

  /** Non-blank lines, stripped: indentation differs between a file and a doc's block. */
  private static List<String> lines(String text) {
    return text.lines().map(String::strip).filter(l -> !l.isEmpty()).toList();
  }
}
