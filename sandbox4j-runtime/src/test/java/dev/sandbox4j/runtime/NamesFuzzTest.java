package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Fuzzes the names a client or a sandbox hands the engine and that become file names in its state
 * directory or keys in its records: sandbox ids, image and snapshot names, labels. A valid one is a
 * single file name beneath its directory (no separator, no {@code .} or {@code ..}, no NUL); an
 * invalid one fails with the documented typed exception, never another. Seeds: {@code
 * src/test/resources/dev/sandbox4j/runtime/NamesFuzzTestInputs}; bench/README.md says how CI and
 * the bench fuzz for real.
 */
class NamesFuzzTest {

  private static final Path SANDBOXES = Path.of("/state/sandboxes");
  private static final Path IMAGES = Path.of("/state/images");

  /** {@code name} resolved in {@code dir} is one entry right beneath it. */
  private static void assertOneEntryBeneath(Path dir, String name) {
    assertThat(name).doesNotContain("/", "\0").isNotIn(".", "..", "");
    Path p = dir.resolve(name).normalize();
    assertThat(p.getParent()).as("%s stays in %s", name, dir).isEqualTo(dir);
    assertThat(p.getFileName().toString()).isEqualTo(name);
  }

  @FuzzTest(maxDuration = "10s")
  void sandboxIdsAreOneFileNameOrRefused(FuzzedDataProvider data) {
    String id = Fuzzing.text(data);
    boolean valid = SandboxHome.isId(id);
    try {
      SandboxHome.checkId(id);
      assertThat(valid).as("checkId and isId agree on '%s'", id).isTrue();
    } catch (IllegalArgumentException refused) {
      assertThat(valid).as("checkId and isId agree on '%s'", id).isFalse();
      assertThat(refused.getMessage()).contains("malformed local sandbox id");
      return;
    }
    assertOneEntryBeneath(SANDBOXES, id);
  }

  @FuzzTest(maxDuration = "10s")
  void imageAndSnapshotNamesAreOneFileNameOrRefused(FuzzedDataProvider data) throws Exception {
    String name = Fuzzing.text(data);
    boolean storeAccepts;
    try {
      ImageStore.checkName(name);
      storeAccepts = true;
    } catch (WorkspaceException refused) {
      assertThat(refused.getMessage()).startsWith("invalid image name");
      storeAccepts = false;
    }
    boolean builderAccepts;
    try {
      LocalSandbox.builder().snapshot(name);
      builderAccepts = true;
    } catch (IllegalArgumentException refused) {
      assertThat(refused.getMessage()).contains("invalid snapshot name");
      builderAccepts = false;
    }
    assertThat(builderAccepts)
        .as("the builder and the store agree on '%s'", name)
        .isEqualTo(storeAccepts);
    if (storeAccepts) {
      assertOneEntryBeneath(IMAGES, name);
      assertThat(name).isNotEqualTo("layers");
    }
  }

  @FuzzTest(maxDuration = "10s")
  void labelsAreBoundedPrintableOrRefused(FuzzedDataProvider data) {
    String key = data.consumeString(100);
    String value = Fuzzing.text(data);
    try {
      LocalSandbox.builder().label(key, value);
    } catch (IllegalArgumentException refused) {
      assertThat(refused.getMessage()).containsAnyOf("invalid label key", "invalid value for");
      return;
    }
    assertThat(key).hasSizeBetween(1, 63).doesNotContain("\0", "\n").matches("[A-Za-z0-9].*");
    assertThat(value.length()).isLessThanOrEqualTo(256);
    assertThat(value.chars()).noneMatch(c -> c < 0x20);
  }

  /** An image store over an empty directory: a valid name finds nothing, and nothing is made. */
  @FuzzTest(maxDuration = "10s")
  void findingAnImageNeverLeavesTheStore(FuzzedDataProvider data) throws Exception {
    String name = Fuzzing.text(data);
    Path dir = Files.createTempDirectory("s4j-fuzz-images");
    try {
      Optional<Image> found;
      try {
        found = new ImageStore(dir.resolve("images")).find(name);
      } catch (WorkspaceException refused) {
        assertThat(refused.getMessage()).startsWith("invalid image name");
        return;
      }
      assertThat(found).isEmpty();
      try (var left = Files.list(dir)) {
        assertThat(left).as("finding creates nothing").isEmpty();
      }
    } finally {
      Trees.delete(dir);
    }
  }
}
