package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.opentelemetry.api.OpenTelemetry;
import java.lang.System.Logger.Level;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.stream.Collectors;

/**
 * The workspace of one run: chosen when the run starts (so a ref no capability handles fails before
 * the first model request), built on first use, announced when the run created it.
 *
 * <p>Guarded by {@code this}: {@code backend}, {@code workspace}, {@code announced}.
 */
final class WorkspaceSession {

  private static final System.Logger LOG = System.getLogger(WorkspaceSession.class.getName());

  private final RunConfig.WorkspaceChoice choice;
  private final WorkspaceProvider provider; // null for a caller-supplied backend
  private final Consumer<WorkspaceRef> onCreated;
  private final OpenTelemetry openTelemetry; // null: the workspace's default, the global one
  private WorkspaceBackend backend;
  private Workspace workspace;
  private boolean announced;

  WorkspaceSession(
      RunConfig.WorkspaceChoice explicit,
      List<Message> history,
      List<WorkspaceProvider> providers,
      Consumer<WorkspaceRef> onCreated,
      OpenTelemetry openTelemetry) {
    this.onCreated = onCreated;
    this.openTelemetry = openTelemetry;
    RunConfig.WorkspaceChoice chosen = explicit;
    if (chosen == null) {
      chosen =
          Messages.latestWorkspace(history)
              .<RunConfig.WorkspaceChoice>map(RunConfig.WorkspaceChoice.Ref::new)
              .orElse(null);
    }
    this.choice = chosen;
    this.provider =
        switch (chosen) {
          case RunConfig.WorkspaceChoice.Backend b -> null;
          case RunConfig.WorkspaceChoice.Ref r -> providerFor(r.ref(), providers);
          case null, default -> providers.isEmpty() ? null : providers.getFirst();
        };
  }

  private static WorkspaceProvider providerFor(
      WorkspaceRef ref, List<WorkspaceProvider> providers) {
    for (WorkspaceProvider candidate : providers) {
      if (candidate.name().equals(ref.provider())) {
        return candidate;
      }
    }
    throw new AgentException(
        "workspace "
            + ref
            + " belongs to provider '"
            + ref.provider()
            + "', but no capability of this agent handles it ("
            + (providers.isEmpty()
                ? "the agent has no workspace capability"
                : "it handles "
                    + providers.stream()
                        .map(p -> "'" + p.name() + "'")
                        .collect(Collectors.joining(", ")))
            + "); add WorkspaceCapability.of(<a "
            + ref.provider()
            + " provider>)");
  }

  /**
   * The run's workspace. The first call for a workspace the run creates also creates it, so that
   * {@link AgentEvent.WorkspaceCreated} and the log line come as soon as the sandbox exists, not
   * when the tool call that first used it ends (an application may want the ref during a long first
   * command).
   */
  Workspace workspace() {
    Workspace ws = workspaceObject();
    if (createsItsWorkspace() && !isAnnounced()) {
      ws.open();
      announceIfCreated();
    }
    return ws;
  }

  private synchronized Workspace workspaceObject() {
    if (workspace == null) {
      backend =
          switch (choice) {
            case RunConfig.WorkspaceChoice.Backend b -> b.backend();
            case RunConfig.WorkspaceChoice.Ref r ->
                provider
                    .backend(r.ref())
                    .orElseThrow(
                        () ->
                            new AgentException(
                                "provider '" + provider.name() + "' refused ref " + r.ref()));
            case null, default -> {
              if (provider == null) {
                throw new AgentException(
                    "this run has no workspace: give the agent a workspace capability"
                        + " (WorkspaceCapability.of(new LocalSandbox()), say), or pass a workspace"
                        + " in the run's RunConfig");
              }
              yield provider.newBackend();
            }
          };
      workspace = Workspace.of(backend);
      if (openTelemetry != null) {
        workspace = workspace.withOpenTelemetry(openTelemetry);
      }
    }
    return workspace;
  }

  private synchronized boolean isAnnounced() {
    return announced;
  }

  /** Whether this run makes a new workspace (rather than attaching to one or using one given). */
  private boolean createsItsWorkspace() {
    return provider != null && !(choice instanceof RunConfig.WorkspaceChoice.Ref);
  }

  /** The ref in force: the one the run attaches to, or the one it created, once known. */
  synchronized Optional<WorkspaceRef> ref() {
    if (backend != null) {
      Optional<WorkspaceRef> ref = backend.ref();
      if (ref.isPresent()) {
        return ref;
      }
    }
    if (choice instanceof RunConfig.WorkspaceChoice.Ref r) {
      return Optional.of(r.ref());
    }
    return Optional.empty();
  }

  /** Logs and reports a workspace this run created, once, as soon as its ref is known. */
  void announceIfCreated() {
    WorkspaceRef created;
    synchronized (this) {
      if (!createsItsWorkspace() || backend == null || announced) {
        return;
      }
      Optional<WorkspaceRef> ref = backend.ref();
      if (ref.isEmpty()) {
        return;
      }
      announced = true;
      created = ref.get();
    }
    LOG.log(Level.INFO, "Created {0} sandbox {1}", created.provider(), created.id());
    onCreated.accept(created);
  }
}
