package dev.sandbox4j.bench;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * The {@code local} engine with its defaults ({@code new LocalSandbox()}: state directory {@code
 * $SANDBOX4J_HOME} or {@code /var/lib/sandbox4j}, crun, the default image), or with gVisor
 * isolation ({@code --provider gvisor}). Every sandbox this run creates carries the label {@value
 * #RUN_LABEL} = this run's id, so {@link #close()} finds and destroys whatever is left, including
 * sandboxes other threads were still creating.
 */
final class LocalTarget implements Target {

  /** The label every sandbox of a bench run carries; its value is {@code <pid>@<start time>}. */
  static final String RUN_LABEL = "sandbox4j.bench/run";

  /** node is part of the default image. */
  private static final Command NODE_VERSION = Command.argv("node", "-v");

  private static final int MAX_SWEEPS = 20;
  private static final long SWEEP_PAUSE_MILLIS = 50;

  private final String runId;
  private final Isolation isolation;
  private final LocalSandbox sandboxes;
  private final WorkspaceProvider provider;
  private volatile boolean closing;

  private LocalTarget(Isolation isolation, UnaryOperator<LocalSandbox.Builder> settings) {
    this.runId = ProcessHandle.current().pid() + "@" + Instant.now();
    this.isolation = isolation;
    this.sandboxes =
        settings
            .apply(
                LocalSandbox.builder()
                    .isolation(isolation)
                    .label(RUN_LABEL, runId)
                    .progress(line -> System.err.println("bench: " + line)))
            .build();
    this.provider = new Guarded();
  }

  /** The target; warns on stderr about sandboxes earlier bench runs left (killed with -9). */
  static LocalTarget create() {
    return create(Isolation.CONTAINER);
  }

  /**
   * The target with sandboxes of {@code isolation}: {@code gvisor} measures the common scenarios
   * only (its lifecycle differs: no hibernate, no live fork).
   */
  static LocalTarget create(Isolation isolation) {
    return create(isolation, UnaryOperator.identity());
  }

  /**
   * The target with sandboxes of {@code isolation}, built by a builder that {@code settings} adapts
   * (a private home, a disk budget: {@link DensityBench}); the run label is set before.
   */
  static LocalTarget create(Isolation isolation, UnaryOperator<LocalSandbox.Builder> settings) {
    LocalTarget target = new LocalTarget(isolation, settings);
    target.warnAboutLeftovers();
    return target;
  }

  /** The engine itself, for what the workspace API does not cover (listing, the home). */
  LocalSandbox engine() {
    return sandboxes;
  }

  /** This run's id, the value of {@link #RUN_LABEL} on its sandboxes. */
  String runId() {
    return runId;
  }

  @Override
  public WorkspaceProvider provider() {
    return provider;
  }

  @Override
  public Command firstCommand() {
    return NODE_VERSION;
  }

  @Override
  public boolean sandboxed() {
    return true;
  }

  @Override
  public java.util.Optional<Target.ExtraScenarios> extraScenarios() {
    WarmPoolScenarios warm =
        new WarmPoolScenarios(
            LocalSandbox.builder()
                .isolation(isolation)
                .label(RUN_LABEL, runId)
                .progress(line -> System.err.println("bench: " + line)),
            NODE_VERSION);
    if (isolation != Isolation.CONTAINER) {
      return java.util.Optional.of(warm);
    }
    LifecycleScenarios lifecycle =
        new LifecycleScenarios(
            sandboxes,
            snapshot ->
                LocalSandbox.builder()
                    .label(RUN_LABEL, runId)
                    .snapshot(snapshot)
                    .progress(line -> System.err.println("bench: " + line))
                    .build(),
            NODE_VERSION);
    NeighbourScenarios neighbours =
        new NeighbourScenarios(
            LocalSandbox.builder()
                .label(RUN_LABEL, runId)
                .progress(line -> System.err.println("bench: " + line)));
    return java.util.Optional.of(
        new Target.ExtraScenarios() {
          @Override
          public java.util.List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup) {
            java.util.List<WorkspaceBench.Scenario> all =
                new java.util.ArrayList<>(lifecycle.scenarios(iterations, warmup));
            all.addAll(neighbours.scenarios(iterations, warmup));
            all.addAll(warm.scenarios(iterations, warmup));
            return all;
          }

          @Override
          public void close() throws Exception {
            try (warm;
                neighbours) {
              lifecycle.close();
            }
          }
        });
  }

  @Override
  public Map<String, Object> details() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("home", sandboxes.home().toString());
    // the engine prefers the crun `sandbox4j setup` builds over Debian's (see OciRuntime)
    String fixed =
        "/usr/local/libexec/sandbox4j/" + (isolation == Isolation.GVISOR ? "runsc" : "crun");
    String runtime =
        java.nio.file.Files.isExecutable(java.nio.file.Path.of(fixed))
            ? fixed
            : (isolation == Isolation.GVISOR ? "runsc" : "crun");
    m.put("isolation", isolation.id());
    m.put("runtime", runtime);
    m.put("runtime_version", firstLine(runtime, "--version"));
    m.put("image", "default");
    m.put("run_label", RUN_LABEL + "=" + runId);
    return m;
  }

  /**
   * Refuses new workspaces from now on, then destroys every sandbox labelled with this run's id,
   * sweeping again until two sweeps in a row find none (a create in flight shows up in the list
   * once it has written its state, and its destroy waits for the create to finish).
   */
  @Override
  public void close() {
    closing = true;
    int destroyed = 0;
    int emptySweeps = 0;
    for (int sweep = 0; sweep < MAX_SWEEPS && emptySweeps < 2; sweep++) {
      List<WorkspaceRef> left;
      try {
        left = mine();
      } catch (RuntimeException e) {
        System.err.println("bench: cannot list local sandboxes: " + e);
        return;
      }
      emptySweeps = left.isEmpty() ? emptySweeps + 1 : 0;
      for (WorkspaceRef ref : left) {
        try {
          sandboxes.destroy(ref);
          destroyed++;
        } catch (RuntimeException e) {
          System.err.println("bench: could not destroy " + ref + ": " + e);
        }
      }
      if (emptySweeps < 2) {
        pause();
      }
    }
    if (destroyed > 0) {
      System.err.printf("bench: destroyed %d sandbox(es) this run left%n", destroyed);
    }
  }

  /** The sandboxes of this run that still exist. */
  private List<WorkspaceRef> mine() {
    return sandboxes.list().stream()
        .filter(info -> runId.equals(info.labels().get(RUN_LABEL)))
        .map(SandboxInfo::ref)
        .toList();
  }

  /** Sandboxes of bench runs whose JVM is gone: said on stderr, never destroyed here. */
  private void warnAboutLeftovers() {
    List<String> leftovers =
        sandboxes.list().stream()
            .filter(info -> info.labels().containsKey(RUN_LABEL))
            .filter(info -> !runAlive(info.labels().get(RUN_LABEL)))
            .map(info -> info.ref().id())
            .toList();
    if (!leftovers.isEmpty()) {
      System.err.printf(
          "bench: %d sandbox(es) of earlier bench runs that were killed are still there;"
              + " remove them with: ./sandbox4j rm %s%n",
          leftovers.size(), String.join(" ", leftovers));
    }
  }

  /** Whether the run {@code <pid>@<time>} may still be going (its pid is alive here). */
  private static boolean runAlive(String runId) {
    int at = runId.indexOf('@');
    try {
      long pid = Long.parseLong(at < 0 ? runId : runId.substring(0, at));
      return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    } catch (NumberFormatException e) {
      return true; // not ours to judge
    }
  }

  private static void pause() {
    try {
      Thread.sleep(SWEEP_PAUSE_MILLIS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The first line {@code argv} prints, or null if it cannot run. */
  static String firstLine(String... argv) {
    try {
      Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(5, TimeUnit.SECONDS) || p.exitValue() != 0) {
        p.destroyForcibly();
        return null;
      }
      return out.lines().findFirst().orElse(null);
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** The engine, refusing new workspaces once {@link #close()} has begun. */
  private final class Guarded implements WorkspaceProvider {
    @Override
    public String name() {
      return sandboxes.name();
    }

    @Override
    public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
      return sandboxes.backend(ref);
    }

    @Override
    public WorkspaceBackend newBackend() {
      if (closing) {
        throw new IllegalStateException("the bench is shutting down: no new sandboxes");
      }
      return sandboxes.newBackend();
    }

    @Override
    public void destroy(WorkspaceRef ref) {
      sandboxes.destroy(ref);
    }
  }
}
