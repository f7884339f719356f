package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.sandbox4j.runtime.internal.engine.SandboxFilesFuzzTest;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Every fuzz target of the engine's boundary in one: Jazzer fuzzes a single test per JVM, so CI
 * (profile {@code ci}: {@code CI=true}) fuzzes this one for a bounded time and so covers them all,
 * the input's last byte choosing the target. Each target's own test ({@link NamesFuzzTest}, {@link
 * EgressPolicyFuzzTest}, {@link SandboxFilesFuzzTest}, and {@code WorkspaceRefFuzzTest} in
 * sandbox4j-workspace) holds its seeds and is what {@code bench/fuzz} fuzzes at length.
 */
class BoundaryFuzzTest {

  @BeforeAll
  static void plant() throws IOException {
    SandboxFilesFuzzTest.plant();
  }

  @AfterAll
  static void destroy() throws IOException {
    SandboxFilesFuzzTest.destroy();
  }

  @FuzzTest(maxDuration = "15s")
  void everyBoundary(FuzzedDataProvider data) throws Exception {
    switch (data.consumeInt(0, 7)) {
      case 0 -> workspaceRef(Fuzzing.text(data));
      case 1 -> new NamesFuzzTest().sandboxIdsAreOneFileNameOrRefused(data);
      case 2 -> new NamesFuzzTest().imageAndSnapshotNamesAreOneFileNameOrRefused(data);
      case 3 -> new NamesFuzzTest().labelsAreBoundedPrintableOrRefused(data);
      case 4 -> new NamesFuzzTest().findingAnImageNeverLeavesTheStore(data);
      case 5 ->
          new EgressPolicyFuzzTest()
              .rulesParseToAPolicyThatRoundTripsOrFailWithIllegalArgument(data);
      case 6 -> new EgressPolicyFuzzTest().savedPoliciesReadBackOrFailWithIllegalArgument(data);
      default -> new SandboxFilesFuzzTest().noPathReachesTheHost(data);
    }
  }

  /** As sandbox4j-workspace's WorkspaceRefFuzzTest (package-private there). */
  private static void workspaceRef(String text) {
    WorkspaceRef ref;
    try {
      ref = WorkspaceRef.parse(text);
    } catch (IllegalArgumentException refused) {
      assertThat(refused.getMessage()).isNotBlank();
      return;
    }
    assertThat(ref.toString()).isEqualTo(text);
    assertThat(WorkspaceRef.parse(ref.toString())).isEqualTo(ref);
  }
}
