package dev.sandbox4j.agent.tools;

import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.workspace.BackgroundCommand;
import java.time.Duration;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The background commands each run has started, by run and id: a run sees only its own, and they
 * are stopped when it ends. Guarded by {@code this}.
 */
final class BackgroundJobs {

  /** One background command and the decoders that keep its output's UTF-8 whole across checks. */
  record Job(
      BackgroundCommand command, ToolOutputs.ChunkDecoder stdout, ToolOutputs.ChunkDecoder stderr) {
    Job(BackgroundCommand command) {
      this(command, new ToolOutputs.ChunkDecoder(), new ToolOutputs.ChunkDecoder());
    }
  }

  private final Map<RunContext, Map<String, Job>> byRun = new IdentityHashMap<>();

  synchronized void add(RunContext run, Job job) {
    byRun.computeIfAbsent(run, r -> new LinkedHashMap<>()).put(job.command().id(), job);
  }

  synchronized Job get(RunContext run, String id) {
    return byRun.getOrDefault(run, Map.of()).get(id);
  }

  synchronized List<String> ids(RunContext run) {
    return List.copyOf(byRun.getOrDefault(run, Map.of()).keySet());
  }

  synchronized void remove(RunContext run, String id) {
    Map<String, Job> jobs = byRun.get(run);
    if (jobs != null) {
      jobs.remove(id);
      if (jobs.isEmpty()) {
        byRun.remove(run);
      }
    }
  }

  /**
   * Stops every command {@code run} started that still runs (SIGTERM, then SIGKILL after {@code
   * grace}; at once if this thread was interrupted) and forgets them.
   */
  void stopAll(RunContext run, Duration grace) {
    List<Job> jobs;
    synchronized (this) {
      Map<String, Job> removed = byRun.remove(run);
      jobs = removed == null ? List.of() : new ArrayList<>(removed.values());
    }
    boolean interrupted = Thread.interrupted();
    for (Job job : jobs) {
      try {
        if (interrupted) {
          job.command().kill();
        } else {
          job.command().stop(grace);
        }
      } catch (InterruptedException e) {
        interrupted = true;
      } catch (RuntimeException e) {
        // the workspace is gone or unreachable: nothing left to stop
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
