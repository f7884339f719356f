package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SandboxRecordTest {
  @TempDir Path temp;

  private static final SandboxRecord RECORD =
      new SandboxRecord(
          SandboxRecord.FORMAT_VERSION,
          "abc123",
          SandboxRecord.Status.CREATING,
          "default",
          "2026-11-29T00:00:00Z",
          Map.of("k", "v"),
          1,
          1L << 30,
          64,
          List.of("0".repeat(64)));

  @Test
  void aFirstRecordReadsBackAndIsNotTorn() throws Exception {
    Path file = temp.resolve("state.json");
    RECORD.writeNew(file);

    assertThat(SandboxRecord.read(file)).isEqualTo(RECORD);
    assertThat(SandboxRecord.isTorn(file)).isFalse();
  }

  @Test
  void emptyCutShortOrZeroedRecordsAreTorn() throws Exception {
    String whole = Files.readString(write(RECORD));
    for (String content : List.of("", whole.substring(0, whole.length() / 2), "\0\0\0\0")) {
      Path file = Files.writeString(temp.resolve("torn.json"), content);
      assertThat(SandboxRecord.isTorn(file)).as("'" + content + "'").isTrue();
    }
  }

  @Test
  void aWholeRecordThisVersionCannotMapIsNotTorn() throws Exception {
    String whole = Files.readString(write(RECORD));
    Path file = Files.writeString(temp.resolve("future.json"), whole.replace("CREATING", "LATER"));

    assertThat(SandboxRecord.isTorn(file)).isFalse();
  }

  private Path write(SandboxRecord record) throws Exception {
    Path file = temp.resolve("whole.json");
    Files.deleteIfExists(file);
    record.write(file);
    return file;
  }
}
