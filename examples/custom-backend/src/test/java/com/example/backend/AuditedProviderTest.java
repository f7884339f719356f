package com.example.backend;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AuditedProviderTest {
  @TempDir Path root;

  @Test
  void everyCommandAndFileOperationIsAuditedWithItsExitCode() {
    List<String> trail = new CopyOnWriteArrayList<>();
    AuditedProvider provider = new AuditedProvider(HostWorkspaceProvider.create(root), trail::add);
    Workspace ws = Workspace.of(provider.newBackend());
    ws.run(Command.shell("exit 3"));
    ws.writeText("a.txt", "x"); // a file operation, built from commands
    WorkspaceRef ref = ws.open();

    assertThat(ref.provider()).isEqualTo("audited");
    assertThat(trail.get(0)).startsWith("run ").contains("exit 3");
    assertThat(trail.get(1)).startsWith("exit 3 ");
    assertThat(trail.size()).isGreaterThan(2);
    assertThat(Workspace.of(provider.backend(ref).orElseThrow()).readText("a.txt")).isEqualTo("x");
    provider.destroy(ref);
    Workspace gone = Workspace.of(provider.backend(ref).orElseThrow());
    assertThatThrownBy(() -> gone.readText("a.txt"))
        .isInstanceOf(WorkspaceUnavailableException.class);
  }

  @Test
  void anotherProvidersRefIsNotOffered() {
    AuditedProvider provider = new AuditedProvider(HostWorkspaceProvider.create(root), s -> {});
    assertThat(provider.backend(new WorkspaceRef("host", "x"))).isEmpty();
    assertThatThrownBy(() -> provider.destroy(new WorkspaceRef("host", "x")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not an audited workspace: host:x");
  }
}
