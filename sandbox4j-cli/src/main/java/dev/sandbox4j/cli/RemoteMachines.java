package dev.sandbox4j.cli;

import dev.sandbox4j.remote.ForkResult;
import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.remote.SandboxInfo;
import dev.sandbox4j.remote.SandboxTimers;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/** The machine commands on a sandbox4j server's sandboxes, through {@link RemoteSandbox}. */
final class RemoteMachines implements Machines {

  private final Providers providers;

  RemoteMachines(Providers providers) {
    this.providers = providers;
  }

  private RemoteSandbox server() {
    return providers.remote(Providers.Settings.DEFAULTS);
  }

  @Override
  public String name() {
    return RemoteSandbox.NAME;
  }

  @Override
  public WorkspaceProvider provider(Providers.Settings settings) {
    return providers.remote(settings);
  }

  @Override
  public boolean mayHoldMachines() {
    return true;
  }

  @Override
  public List<Map<String, Object>> list() {
    return rows(server());
  }

  /** The rows {@code ls} shows: the same fields as for local sandboxes. */
  static List<Map<String, Object>> rows(RemoteSandbox server) {
    return server.list().stream().map(RemoteMachines::fields).toList();
  }

  private static Map<String, Object> fields(SandboxInfo s) {
    SandboxTimers t = s.timers();
    return Providers.fields(
        s.ref(),
        s.state(),
        s.image(),
        s.created(),
        s.labels(),
        s.cpus(),
        s.memoryBytes(),
        s.pids(),
        t == null ? null : t.autoSuspendTimeout(),
        t == null ? null : t.sandboxTimeout(),
        t == null ? null : t.idleTimeout(),
        t == null ? null : t.deleteAfter(),
        t == null ? null : t.ends(),
        t != null);
  }

  @Override
  public void suspend(WorkspaceRef ref) {
    server().suspend(ref);
  }

  @Override
  public void resume(WorkspaceRef ref) {
    server().resume(ref);
  }

  @Override
  public void stop(WorkspaceRef ref) {
    server().stop(ref);
  }

  @Override
  public void start(WorkspaceRef ref) {
    server().start(ref);
  }

  @Override
  public void hibernate(WorkspaceRef ref) {
    server().hibernate(ref);
  }

  @Override
  public Fork fork(WorkspaceRef ref, boolean filesOnly) {
    ForkResult f = filesOnly ? server().forkFiles(ref) : server().fork(ref);
    return new Fork(f.ref(), f.processesCopied(), f.reason(), f.notCarried());
  }

  @Override
  public String snapshot(WorkspaceRef ref, String name) {
    return server().snapshot(ref, name).name();
  }

  @Override
  public List<Snapshot> snapshots() {
    return server().snapshots().stream()
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
    server().removeSnapshot(name);
  }

  /**
   * The server's API has no terminal: a login shell reads commands from this process's stdin and
   * its output streams back, without a prompt, line editing or job control.
   */
  @Override
  public int shell(WorkspaceRef ref, String workingDirectory, CliContext context) {
    WorkspaceProvider sandboxes =
        provider(Providers.Settings.DEFAULTS.withWorkingDirectory(workingDirectory));
    Workspace ws =
        Workspace.of(
            sandboxes
                .backend(ref)
                .orElseThrow(() -> new IllegalStateException(ref + " is not remote")));
    PrintStream out = context.out();
    PrintStream err = context.err();
    RunOptions options =
        RunOptions.builder()
            .stdin(context.in())
            .retainOutput(false)
            .outputLimit(Long.MAX_VALUE)
            .onStdout(chunk -> forward(out, chunk))
            .onStderr(chunk -> forward(err, chunk))
            .build();
    return ws.run(
            Command.argv(
                "/bin/sh", "-c", "command -v bash >/dev/null && exec bash --login -s; exec sh -s"),
            options)
        .exitCode();
  }

  private static void forward(PrintStream stream, byte[] chunk) {
    stream.write(chunk, 0, chunk.length);
    stream.flush();
  }
}
