package dev.sandbox4j.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The docs' code comes from the examples, which the build compiles and runs: a code block that
 * follows {@code <!-- snippet: examples/FILE#REGION -->} must be made of lines of that file's
 * region (between {@code [REGION]} and {@code [/REGION]} comments), in the same order. A block may
 * leave lines out (a test dependency, say) but can show nothing the example does not do.
 */
class DocSnippetsTest {
  private static final Path REPO = Path.of("..").toAbsolutePath().normalize();
  private static final List<String> DOCS = List.of("README.md", "docs/user-guide.md");
  private static final Pattern SNIPPET =
      Pattern.compile(
          "<!-- snippet: (examples/[^#\\s]+)#([a-z0-9-]+) -->\\n```[a-z]*\\n(.*?)\\n```",
          Pattern.DOTALL);

  @Test
  void everySnippetIsTakenFromAnExampleThatBuilds() throws IOException {
    List<String> checked = new ArrayList<>();
    for (String doc : DOCS) {
      Matcher m = SNIPPET.matcher(Files.readString(REPO.resolve(doc)));
      while (m.find()) {
        String where = doc + " → " + m.group(1) + "#" + m.group(2);
        List<String> region = region(REPO.resolve(m.group(1)), m.group(2), where);
        assertThat(missingFrom(region, lines(m.group(3))))
            .as("%s: these snippet lines are not in the example's region (in this order)", where)
            .isEmpty();
        checked.add(where);
      }
    }
    assertThat(checked)
        .as("the README and the user guide take their setup and API snippets from the examples")
        .anyMatch(s -> s.startsWith("README.md") && s.endsWith("#add-sandbox4j"))
        .anyMatch(s -> s.startsWith("docs/user-guide.md") && s.endsWith("#add-sandbox4j"))
        .anyMatch(s -> s.endsWith("#workspace-api"))
        .anyMatch(s -> s.endsWith("#agent"));
  }

  @Test
  void aSnippetLineThatIsNotInTheExampleIsReported() {
    List<String> region = List.of("a();", "b();", "c();");
    assertThat(missingFrom(region, List.of("a();", "c();"))).isEmpty();
    assertThat(missingFrom(region, List.of("c();", "a();"))).containsExactly("a();");
    assertThat(missingFrom(region, List.of("a();", "d();"))).containsExactly("d();");
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
