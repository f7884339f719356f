package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.lang.System.Logger.Level;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Supplies a run's workspace from a {@link WorkspaceProvider} — {@code new LocalSandbox()}, say —
 * and nothing else: pair it with {@code Coder}, or {@code Shell} and {@code FileSystem}, whose
 * tools then act in that workspace.
 *
 * <p>A run with no ref of its own gets a fresh workspace on first use; a run given a ref (or a
 * history naming one) of this provider attaches to it. The agent never destroys a workspace: {@link
 * #destroy} is for the application, which decides when a machine is done.
 */
public final class WorkspaceCapability<P extends WorkspaceProvider> implements Capability {

  private static final System.Logger LOG = System.getLogger(WorkspaceCapability.class.getName());
  private static final Set<String> WORKSPACE_TOOLS =
      Set.of(
          "run_command",
          "start_command",
          "shell",
          "read_file",
          "write_file",
          "edit_file",
          "list_directory",
          "find_files",
          "grep",
          "create_directory",
          "file_info");

  private final P provider;
  private final boolean warnIfNoTools;
  private final AtomicBoolean warned = new AtomicBoolean();

  private WorkspaceCapability(P provider, boolean warnIfNoTools) {
    this.provider = Objects.requireNonNull(provider, "provider");
    this.warnIfNoTools = warnIfNoTools;
  }

  /** Workspaces from {@code provider}. */
  public static <P extends WorkspaceProvider> WorkspaceCapability<P> of(P provider) {
    return new WorkspaceCapability<>(provider, true);
  }

  /**
   * This capability without its warning, logged once, when a run has no Shell or FileSystem tool:
   * for agents that reach the workspace only from their own tools or hooks.
   */
  public WorkspaceCapability<P> withoutToolsWarning() {
    return new WorkspaceCapability<>(provider, false);
  }

  /**
   * The provider workspaces come from, as its own type: for what only that provider has, such as
   * the local engine's named networks or the full {@code EgressPolicy}. What every provider may
   * have (fork, snapshot, suspend, timers, egress rules, port URLs, ...) is in {@link #machine}.
   */
  public P provider() {
    return provider;
  }

  /**
   * The provider as one of its machine capabilities of {@link dev.sandbox4j.workspace.machine}, or
   * empty if it does not have that one: an application (or a tool of its own) can fork, snapshot,
   * suspend a run's workspace or narrow its egress without knowing which provider holds it.
   *
   * {@snippet :
   * capability.machine(SupportsFork.class).ifPresent(forks -> forks.fork(ref));
   * }
   */
  public <C> Optional<C> machine(Class<C> capability) {
    Objects.requireNonNull(capability, "capability");
    return capability.isInstance(provider)
        ? Optional.of(capability.cast(provider))
        : Optional.empty();
  }

  @Override
  public Optional<WorkspaceProvider> workspaceProvider() {
    return Optional.of(provider);
  }

  /** A backend for a stored ref, without I/O (see {@link WorkspaceProvider#backend}). */
  public WorkspaceBackend backend(WorkspaceRef ref) {
    return provider
        .backend(ref)
        .orElseThrow(
            () ->
                new IllegalArgumentException(
                    "ref "
                        + ref
                        + " belongs to provider '"
                        + ref.provider()
                        + "', not '"
                        + provider.name()
                        + "'"));
  }

  /** Destroys the workspace {@code ref} names; one already gone returns quietly. */
  public void destroy(WorkspaceRef ref) {
    provider.destroy(ref);
  }

  void warnIfNoWorkspaceTools(Set<String> toolNames) {
    if (warnIfNoTools
        && toolNames.stream().noneMatch(WORKSPACE_TOOLS::contains)
        && warned.compareAndSet(false, true)) {
      LOG.log(
          Level.WARNING,
          "The agent has a {0} workspace but no Shell or FileSystem tool to use it: add Coder, or"
              + " Shell and FileSystem; for agents that use it from their own tools, use"
              + " WorkspaceCapability.of(provider).withoutToolsWarning()",
          provider.name());
    }
  }
}
