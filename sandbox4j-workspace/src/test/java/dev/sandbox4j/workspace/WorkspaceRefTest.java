package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class WorkspaceRefTest {

  private final ObjectMapper json = new ObjectMapper();

  @Test
  void roundTripsThroughString() {
    WorkspaceRef ref = new WorkspaceRef("local", "k3x9ab");
    assertThat(ref.toString()).isEqualTo("local:k3x9ab");
    assertThat(WorkspaceRef.parse("local:k3x9ab")).isEqualTo(ref);
  }

  @Test
  void idMayContainColons() {
    WorkspaceRef ref = WorkspaceRef.parse("remote:org:sbx-1");
    assertThat(ref.provider()).isEqualTo("remote");
    assertThat(ref.id()).isEqualTo("org:sbx-1");
    assertThat(WorkspaceRef.parse(ref.toString())).isEqualTo(ref);
  }

  @Test
  void roundTripsThroughJson() throws Exception {
    WorkspaceRef ref = new WorkspaceRef("host", "abc123");
    String text = json.writeValueAsString(ref);
    assertThat(json.readTree(text).properties())
        .extracting(e -> e.getKey() + "=" + e.getValue().asText())
        .containsExactlyInAnyOrder("provider=host", "id=abc123");
    assertThat(json.readValue(text, WorkspaceRef.class)).isEqualTo(ref);
  }

  @Test
  void invalidJsonIsRejectedByTheConstructor() {
    assertThatThrownBy(
            () ->
                json.readValue("{\"provider\":\"Bad Provider\",\"id\":\"x\"}", WorkspaceRef.class))
        .hasRootCauseInstanceOf(IllegalArgumentException.class)
        .rootCause()
        .hasMessageContaining("invalid workspace provider 'Bad Provider'");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {"", "local", ":abc", "local:", "Local:x", "lo cal:x", "local:a b", "9x:y"})
  void malformedStringsAreRejectedClearly(String text) {
    assertThatThrownBy(() -> WorkspaceRef.parse(text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageMatching("(?s).*(malformed workspace ref|invalid workspace (provider|id)).*");
  }

  @Test
  void controlCharactersAreShownEscaped() {
    assertThatThrownBy(() -> new WorkspaceRef("local", "a\nb")).hasMessageContaining("'a\\x0ab'");
    assertThatThrownBy(() -> WorkspaceRef.parse(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new WorkspaceRef("local", "x".repeat(257)))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
