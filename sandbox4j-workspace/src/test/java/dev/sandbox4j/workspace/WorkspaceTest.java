package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The facade's own logic, on a backend that has only the required core. */
class WorkspaceTest {

  private final AtomicInteger opens = new AtomicInteger();

  private final WorkspaceBackend coreOnly =
      new WorkspaceBackend() {
        @Override
        public Optional<WorkspaceRef> ref() {
          return Optional.of(new WorkspaceRef("test", "one"));
        }

        @Override
        public String workingDirectory() {
          opens.incrementAndGet();
          return "/home/sandbox";
        }
      };

  @Test
  void resolveJoinsAndNormalisesButKeepsDotDot() {
    Workspace ws = Workspace.of(coreOnly);
    assertThat(ws.resolve("a/./b//c/")).isEqualTo("/home/sandbox/a/b/c");
    assertThat(ws.resolve("")).isEqualTo("/home/sandbox");
    assertThat(ws.resolve(".")).isEqualTo("/home/sandbox");
    assertThat(ws.resolve("../x")).isEqualTo("/home/sandbox/../x");
    assertThat(ws.resolve("/")).isEqualTo("/");
    assertThat(ws.resolve("//etc/./passwd")).isEqualTo("/etc/passwd");
  }

  @Test
  void resolveRejectsBadPaths() {
    Workspace ws = Workspace.of(coreOnly);
    assertThatThrownBy(() -> ws.resolve(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> ws.resolve("a\0b"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("NUL");
    assertThatThrownBy(() -> ws.resolve("x".repeat(4097)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("4096");
  }

  @Test
  void absolutePathsNeedNoWorkingDirectory() {
    Workspace.of(coreOnly).resolve("/abs/path");
    assertThat(opens).hasValue(0);
  }

  @Test
  void missingCapabilitiesAreClearErrors() {
    Workspace ws = Workspace.of(coreOnly);
    assertThat(ws.supportsCommands()).isFalse();
    assertThat(ws.supportsFiles()).isFalse();
    assertThatThrownBy(() -> ws.run(Command.argv("true")))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("runs no commands");
    assertThatThrownBy(() -> ws.readText("/x"))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("neither files nor commands");
  }

  @Test
  void readOnlyIsChecked_beforeTheBackendIsTouched() {
    Workspace ro = Workspace.of(coreOnly).readOnly();
    assertThat(ro.isReadOnly()).isTrue();
    assertThat(ro.readOnly()).isSameAs(ro);
    assertThatThrownBy(() -> ro.writeText("/x", "y"))
        .isInstanceOf(WorkspaceReadOnlyException.class)
        .hasMessageContaining("cannot write /x");
    assertThatThrownBy(() -> ro.run(Command.argv("true")))
        .isInstanceOf(WorkspaceReadOnlyException.class);
    assertThat(ro.ref()).contains(new WorkspaceRef("test", "one"));
  }
}
