package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * Fuzzes {@link WorkspaceRef#parse}, which reads refs a client or a model hands the engine: a ref
 * parses to a provider and an id that round-trip, or fails with {@link IllegalArgumentException},
 * never anything else. Seeds: {@code src/test/resources/.../WorkspaceRefFuzzTestInputs}. In the
 * build the seeds run (regression mode); CI fuzzes for real with {@code JAZZER_FUZZ=1}, see
 * bench/README.md.
 */
class WorkspaceRefFuzzTest {

  @FuzzTest(maxDuration = "15s")
  void refsParseAndRoundTripOrFailWithIllegalArgument(FuzzedDataProvider data) {
    String text = Fuzzing.text(data);
    WorkspaceRef ref;
    try {
      ref = WorkspaceRef.parse(text);
    } catch (IllegalArgumentException refused) {
      assertThat(refused.getMessage()).as("the error names what was wrong").isNotBlank();
      return;
    }
    assertThat(ref.provider()).isNotEmpty().doesNotContain(":");
    assertThat(ref.id()).isNotEmpty();
    assertThat(ref.toString()).isEqualTo(text);
    assertThat(WorkspaceRef.parse(ref.toString())).isEqualTo(ref);
  }
}
