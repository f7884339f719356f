package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * {@link ErrorCode}, the table of codes in docs/server-api.md and the OpenAPI document's {@code
 * Error} list the same codes.
 */
class ErrorCodeTest {

  /** A row of the table: {@code | 409 | `already_exists`, `is_directory` | when |}. */
  private static final Pattern ROW = Pattern.compile("(?m)^\\s*\\| (\\d{3}) \\| ([^|]*) \\|");

  private static final Pattern CODE = Pattern.compile("`([a-z_]+)`");

  /** Every "status code" pair the table of docs/server-api.md lists. */
  static Set<String> documented() throws Exception {
    String text = Files.readString(Path.of("..", "docs", "server-api.md"));
    Set<String> pairs = new TreeSet<>();
    Matcher row = ROW.matcher(text);
    while (row.find()) {
      Matcher code = CODE.matcher(row.group(2));
      while (code.find()) {
        pairs.add(row.group(1) + " " + code.group(1));
      }
    }
    return pairs;
  }

  @Test
  void theDocumentedTableListsExactlyTheCodesWithTheirStatus() throws Exception {
    Set<String> declared =
        Arrays.stream(ErrorCode.values())
            .map(c -> c.status() + " " + c.spelling())
            .collect(Collectors.toCollection(TreeSet::new));
    assertThat(documented())
        .as("docs/server-api.md's table of error codes, against ErrorCode")
        .isEqualTo(declared);
  }

  @Test
  void theOpenApiErrorListsEveryCodeButTheExecOnlyOutputLimit() throws Exception {
    Set<String> listed = new TreeSet<>();
    try (InputStream in = ApiServlet.class.getResourceAsStream("openapi.json")) {
      Json.MAPPER
          .readTree(in)
          .at("/components/schemas/Error/properties/error/properties/code/enum")
          .forEach(code -> listed.add(code.asText()));
    }
    Set<String> declared =
        Arrays.stream(ErrorCode.values())
            // output_limit ends only a command (an exec event, a command state), whose code is free
            .filter(c -> c != ErrorCode.OUTPUT_LIMIT)
            .map(ErrorCode::spelling)
            .collect(Collectors.toCollection(TreeSet::new));
    assertThat(listed).isEqualTo(declared);
  }

  @Test
  void eachCodeHasItsOwnSpellingAndAMeaning() {
    assertThat(Arrays.stream(ErrorCode.values()).map(ErrorCode::spelling))
        .doesNotHaveDuplicates()
        .allMatch(s -> s.matches("[a-z]+(_[a-z]+)*"));
    assertThat(ErrorCode.values()).allMatch(c -> !c.meaning().isBlank());
  }
}
