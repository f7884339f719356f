package dev.sandbox4j.agent;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import dev.sandbox4j.workspace.machine.SupportsFork;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkspaceCapabilityTest {

  /** A provider with one machine capability, suspend, that records what it was asked. */
  static final class Suspending implements WorkspaceProvider, SupportsSuspend {
    final List<String> calls = new ArrayList<>();

    @Override
    public String name() {
      return "suspending";
    }

    @Override
    public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
      return Optional.empty();
    }

    @Override
    public WorkspaceBackend newBackend() {
      throw new UnsupportedOperationException();
    }

    @Override
    public void destroy(WorkspaceRef ref) {}

    @Override
    public void suspend(WorkspaceRef ref) {
      calls.add("suspend " + ref);
    }

    @Override
    public void resume(WorkspaceRef ref) {
      calls.add("resume " + ref);
    }
  }

  @Test
  void machineGivesTheCapabilitiesTheProviderHasAndNoOther() {
    Suspending provider = new Suspending();
    WorkspaceCapability<Suspending> capability = WorkspaceCapability.of(provider);
    WorkspaceRef ref = new WorkspaceRef("suspending", "a");

    capability.machine(SupportsSuspend.class).orElseThrow().suspend(ref);

    assertThat(provider.calls).containsExactly("suspend suspending:a");
    assertThat(capability.machine(SupportsFork.class)).isEmpty();
  }

  @Test
  void aHostProviderHasNoMachineCapabilities(@TempDir Path root) {
    WorkspaceCapability<HostWorkspaceProvider> capability =
        WorkspaceCapability.of(HostWorkspaceProvider.builder().root(root).build());

    assertThat(capability.machine(SupportsSuspend.class)).isEmpty();
    assertThat(capability.machine(SupportsFork.class)).isEmpty();
  }
}
