package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * Where the CLI's machine commands (ls, suspend/resume/stop/start/hibernate, fork, snapshot, shell)
 * act: the local engine, or a sandbox4j server when {@code --server} or {@code $SANDBOX4J_URL}
 * names one. Each command is written once against this; {@link LocalMachines} and {@link
 * RemoteMachines} do the work. Creating, exec, cp and rm go through {@link #provider()}, the
 * provider whose refs these machines are.
 */
interface Machines {

  /** The provider name of these machines' refs: {@code local} or {@code remote}. */
  String name();

  /** The provider, configured by {@code settings} for new sandboxes. Does no I/O. */
  WorkspaceProvider provider(Providers.Settings settings);

  /** Whether there may be machines to list (false before the local engine's first sandbox). */
  boolean mayHoldMachines();

  /** The rows {@code ls} shows, as {@link Providers#list} documents them. */
  List<Map<String, Object>> list();

  void suspend(WorkspaceRef ref);

  void resume(WorkspaceRef ref);

  void stop(WorkspaceRef ref);

  void start(WorkspaceRef ref);

  void hibernate(WorkspaceRef ref);

  Fork fork(WorkspaceRef ref, boolean filesOnly);

  /** Saves a snapshot; returns its name. */
  String snapshot(WorkspaceRef ref, String name);

  /** Every snapshot, sorted by name. */
  List<Snapshot> snapshots();

  void removeSnapshot(String name);

  /**
   * Opens an interactive shell in the sandbox and returns its exit status.
   *
   * @param workingDirectory where it starts, or null for the sandbox's default
   */
  int shell(WorkspaceRef ref, String workingDirectory, CliContext context);

  /** What a fork made; as the local engine's {@code ForkResult}. */
  record Fork(WorkspaceRef ref, boolean processesCopied, String reason, List<String> notCarried) {}

  /** One snapshot; as the local engine's {@code SnapshotInfo}. */
  record Snapshot(
      String name,
      Instant created,
      WorkspaceRef source,
      String image,
      int cpus,
      long memoryBytes,
      int pids,
      long sizeBytes) {}
}
