package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.sandbox4j.runtime.Fuzzing;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Fuzzes the file API's paths against a real sandbox whose files are hostile: symlinks to a host
 * directory (absolute and by {@code ../}), to {@code /proc/1/root}, and in a loop. Whatever the
 * path, an operation succeeds inside the sandbox or fails with a {@link WorkspaceFileException}
 * subclass or an {@link IllegalArgumentException} (a NUL, an empty path), never another exception;
 * a read never returns the host canary and nothing on the host changes. Seeds: {@code
 * src/test/resources/dev/sandbox4j/runtime/SandboxFilesFuzzTestInputs}.
 */
public class SandboxFilesFuzzTest {

  /** A host directory the sandbox's symlinks point at; its content must never leak or change. */
  static final Path OUTSIDE = Path.of("/tmp/s4j-fuzz-outside");

  private static final String CANARY = "HOST-CANARY-5b1e";
  private static LocalSandbox sandboxes;
  private static Workspace ws;

  @BeforeAll
  public static void plant() throws IOException {
    Prerequisites.requireLocalEngine();
    Trees.delete(OUTSIDE);
    Files.createDirectories(OUTSIDE);
    Files.writeString(OUTSIDE.resolve("secret"), CANARY);
    sandboxes = new LocalSandbox();
    ws = Workspace.of(sandboxes.newBackend());
    CommandResult r =
        ws.run(
            Command.shell(
                "ln -s "
                    + OUTSIDE
                    + " abs && ln -s ../../../../../../../.."
                    + OUTSIDE
                    + " rel && ln -s /proc/1/root magic && ln -s loop2 loop1 && ln -s loop1 loop2"
                    + " && mkdir -p d/e && echo inside > d/e/f && ln -s / root"));
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
  }

  @AfterAll
  public static void destroy() throws IOException {
    if (ws != null) {
      ws.ref().ifPresent((WorkspaceRef ref) -> sandboxes.destroy(ref));
    }
    Trees.delete(OUTSIDE);
  }

  @FuzzTest(maxDuration = "15s")
  public void noPathReachesTheHost(FuzzedDataProvider data) throws IOException {
    // The whole input is the path (so a seed file is one); the operation and a rename's target
    // are derived from it.
    String path = Fuzzing.text(data);
    int op = Math.floorMod(path.hashCode(), 7);
    String other = path.substring(path.length() / 2);
    try {
      switch (op) {
        case 0 -> assertThat(ws.readText(path)).doesNotContain(CANARY);
        case 1 -> ws.writeText(path, "written");
        case 2 -> {
          for (DirectoryEntry e : ws.list(path)) {
            assertThat(e.name()).isNotEqualTo("secret");
          }
        }
        case 3 -> ws.stat(path);
        case 4 -> ws.createDirectories(path);
        case 5 -> ws.remove(path, false);
        default -> ws.rename(path, other);
      }
    } catch (WorkspaceFileException | IllegalArgumentException expected) {
      // the documented, typed refusals
    }
    try (Stream<Path> files = Files.list(OUTSIDE)) {
      assertThat(files.map(p -> p.getFileName().toString()).toList())
          .as("the host directory the sandbox's links point at is unchanged")
          .isEqualTo(List.of("secret"));
    }
    assertThat(Files.readString(OUTSIDE.resolve("secret"))).isEqualTo(CANARY);
  }
}
