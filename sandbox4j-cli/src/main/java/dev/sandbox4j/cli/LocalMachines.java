package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.ForkResult;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.Console;
import java.util.List;
import java.util.Map;

/** The machine commands on this machine's engine, {@link LocalSandbox}. */
final class LocalMachines implements Machines {

  private final Providers providers;

  LocalMachines(Providers providers) {
    this.providers = providers;
  }

  private LocalSandbox engine() {
    return providers.local();
  }

  @Override
  public String name() {
    return LocalSandbox.NAME;
  }

  @Override
  public WorkspaceProvider provider(Providers.Settings settings) {
    return providers.open(LocalSandbox.NAME, settings);
  }

  @Override
  public boolean mayHoldMachines() {
    return providers.mayHoldWorkspaces(LocalSandbox.NAME);
  }

  @Override
  public List<Map<String, Object>> list() {
    return providers.list(engine());
  }

  @Override
  public void suspend(WorkspaceRef ref) {
    engine().suspend(ref);
  }

  @Override
  public void resume(WorkspaceRef ref) {
    engine().resume(ref);
  }

  @Override
  public void stop(WorkspaceRef ref) {
    engine().stop(ref);
  }

  @Override
  public void start(WorkspaceRef ref) {
    engine().start(ref);
  }

  @Override
  public void hibernate(WorkspaceRef ref) {
    engine().hibernate(ref);
  }

  @Override
  public Fork fork(WorkspaceRef ref, boolean filesOnly) {
    // a sandbox on named networks is forked by a provider on those networks
    LocalSandbox onItsNetworks = providers.forRef(engine(), ref);
    ForkResult f = filesOnly ? onItsNetworks.forkFiles(ref) : onItsNetworks.fork(ref);
    return new Fork(f.ref(), f.processesCopied(), f.reason(), f.notCarried());
  }

  @Override
  public String snapshot(WorkspaceRef ref, String name) {
    return engine().snapshot(ref, name).name();
  }

  @Override
  public List<Snapshot> snapshots() {
    if (!mayHoldMachines()) {
      return List.of();
    }
    return engine().snapshots().stream()
        .map(
            s ->
                new Snapshot(
                    s.name(),
                    s.created(),
                    s.source(),
                    s.image(),
                    s.cpus(),
                    s.memoryBytes(),
                    s.pids(),
                    s.sizeBytes()))
        .toList();
  }

  @Override
  public void removeSnapshot(String name) {
    engine().removeSnapshot(name);
  }

  /** A real terminal: the engine gives the shell a pty of its own. */
  @Override
  public int shell(WorkspaceRef ref, String workingDirectory, CliContext context) {
    LocalSandbox sandboxes =
        (LocalSandbox) provider(Providers.Settings.DEFAULTS.withWorkingDirectory(workingDirectory));
    Console console = System.console();
    if (console == null || !console.isTerminal()) {
      throw new IllegalArgumentException("shell needs a terminal; use exec");
    }
    return providers.forRef(sandboxes, ref).shell(ref);
  }
}
