package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The served OpenAPI document, the registered routes and docs/server-api.md list the same API. */
class OpenApiTest {

  @TempDir Path data;

  @Test
  void theDocumentListsExactlyTheRegisteredRoutes() throws Exception {
    try (TestServer s = new TestServer(data)) {
      JsonNode doc = s.call(null, "GET", "/v1/openapi.json", null).json();
      assertThat(doc.get("openapi").asText()).isEqualTo("3.1.0");
      Set<String> documented = new TreeSet<>();
      doc.get("paths")
          .properties()
          .forEach(
              p ->
                  p.getValue()
                      .fieldNames()
                      .forEachRemaining(
                          m ->
                              documented.add(
                                  m.toUpperCase(java.util.Locale.ROOT) + " " + p.getKey())));
      assertThat(documented).isEqualTo(new TreeSet<>(s.server.routes()));
    }
  }

  @Test
  void everyRouteIsInTheMarkdownContract() throws Exception {
    Path md = Path.of("..", "docs", "server-api.md");
    String text = Files.readString(md);
    Set<String> written = new TreeSet<>();
    Matcher m = Pattern.compile("`(GET|POST|PUT|DELETE) (/[^` ?]*)").matcher(text);
    while (m.find()) {
      written.add(m.group(1) + " " + m.group(2));
    }
    try (TestServer s = new TestServer(data)) {
      assertThat(written)
          .as("every route has its own row in docs/server-api.md, none added by this test")
          .containsAll(s.server.routes());
    }
  }
}
