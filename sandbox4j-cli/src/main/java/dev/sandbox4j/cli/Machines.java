package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.EgressRules;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import dev.sandbox4j.workspace.machine.SupportsEgress;
import dev.sandbox4j.workspace.machine.SupportsFork;
import dev.sandbox4j.workspace.machine.SupportsHibernate;
import dev.sandbox4j.workspace.machine.SupportsPorts;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import java.io.Console;
import java.io.PrintStream;
import java.net.URI;
import java.util.List;
import java.util.Optional;

/**
 * Where the CLI's machine commands (suspend/resume/stop/start/hibernate, fork, snapshot, egress,
 * url, forward, shell) act: the local engine, or a sandbox4j server when {@code --server} or {@code
 * $SANDBOX4J_URL} names one. Each command is written once against this, and this against the
 * machine capabilities of {@link dev.sandbox4j.workspace.machine}: a provider that lacks one
 * refuses the command.
 */
final class Machines {

  private final Providers providers;
  private final String name;
  private volatile WorkspaceProvider provider;

  /**
   * @param providers where the provider comes from
   * @param name the provider these machines belong to: {@code local} or {@code remote}
   */
  Machines(Providers providers, String name) {
    this.providers = providers;
    this.name = name;
  }

  /** The provider name of these machines' refs: {@code local} or {@code remote}. */
  String name() {
    return name;
  }

  /** The provider with default settings, built on first use (no I/O). */
  private WorkspaceProvider provider() {
    WorkspaceProvider p = provider;
    if (p == null) {
      p = providers.open(name, Providers.Settings.DEFAULTS);
      provider = p;
    }
    return p;
  }

  private <C> C capability(WorkspaceProvider p, Class<C> capability, String what) {
    if (!capability.isInstance(p)) {
      throw new UnsupportedOperationException(
          "provider '" + p.name() + "' cannot " + what + " its sandboxes");
    }
    return capability.cast(p);
  }

  void suspend(WorkspaceRef ref) {
    capability(provider(), SupportsSuspend.class, "suspend").suspend(ref);
  }

  void resume(WorkspaceRef ref) {
    capability(provider(), SupportsSuspend.class, "resume").resume(ref);
  }

  void stop(WorkspaceRef ref) {
    capability(provider(), SupportsStop.class, "stop").stop(ref);
  }

  void start(WorkspaceRef ref) {
    capability(provider(), SupportsStop.class, "start").start(ref);
  }

  void hibernate(WorkspaceRef ref) {
    capability(provider(), SupportsHibernate.class, "hibernate").hibernate(ref);
  }

  /** Forks, with a provider that may reach the sandbox (see {@link Providers#forRef}). */
  ForkResult fork(WorkspaceRef ref, boolean filesOnly) {
    SupportsFork forks = capability(providers.forRef(provider(), ref), SupportsFork.class, "fork");
    return filesOnly ? forks.forkFiles(ref) : forks.fork(ref);
  }

  /** Saves a snapshot. */
  SnapshotInfo snapshot(WorkspaceRef ref, String name) {
    return capability(provider(), SupportsSnapshots.class, "snapshot").snapshot(ref, name);
  }

  /** Every snapshot, sorted by name (none before the local engine's first sandbox). */
  List<SnapshotInfo> snapshots() {
    if (!providers.mayHoldWorkspaces(name)) {
      return List.of();
    }
    return capability(provider(), SupportsSnapshots.class, "snapshot").snapshots();
  }

  void removeSnapshot(String name) {
    capability(provider(), SupportsSnapshots.class, "snapshot").removeSnapshot(name);
  }

  EgressRules egressRules(WorkspaceRef ref) {
    return capability(provider(), SupportsEgress.class, "show the egress rules of")
        .egressRules(ref);
  }

  void setEgressRules(WorkspaceRef ref, EgressRules rules) {
    capability(provider(), SupportsEgress.class, "change the egress rules of")
        .setEgressRules(ref, rules);
  }

  URI url(WorkspaceRef ref, int port) {
    return ports().url(ref, port);
  }

  Optional<String> portToken(WorkspaceRef ref) {
    return ports().portToken(ref);
  }

  int forwardTcp(WorkspaceRef ref, int port) {
    return ports().forwardTcp(ref, port);
  }

  /** Whether the provider serves its sandboxes' ports ({@link SupportsPorts}); no I/O. */
  boolean servePorts() {
    return provider() instanceof SupportsPorts;
  }

  private SupportsPorts ports() {
    return capability(provider(), SupportsPorts.class, "serve the ports of");
  }

  /**
   * Opens an interactive shell in the sandbox and returns its exit status. The local engine gives
   * the shell a real terminal of its own; other providers (a server's API has no terminal) run a
   * login shell that reads commands from this process's stdin and streams its output back, without
   * a prompt, line editing or job control.
   *
   * @param workingDirectory where it starts, or null for the sandbox's default
   */
  int shell(WorkspaceRef ref, String workingDirectory, CliContext context) {
    WorkspaceProvider sandboxes =
        providers.open(name, Providers.Settings.DEFAULTS.withWorkingDirectory(workingDirectory));
    if (sandboxes instanceof LocalSandbox local) {
      // a gVisor sandbox has no terminal to give: the engine says so (before it needs this
      // process's terminal), which is the error to show, terminal or not
      boolean gvisor =
          local.info(ref).map(SandboxInfo::isolation).orElse("").equals(Isolation.GVISOR.id());
      Console console = System.console();
      if (!gvisor && (console == null || !console.isTerminal())) {
        throw new IllegalArgumentException("shell needs a terminal; use exec");
      }
      return providers.forRef(local, ref).shell(ref);
    }
    Workspace ws =
        Workspace.of(
            sandboxes
                .backend(ref)
                .orElseThrow(() -> new IllegalStateException(ref + " is not " + name)));
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
