package dev.sandbox4j.bench;

import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;

/**
 * What the server adds to an exec, measured paired: each round runs {@code true} in one sandbox
 * through the engine in this process and through the server (the remote provider), in alternating
 * order, and its sample is the server's time minus the engine's. Pairing cancels the load and drift
 * that make a {@code remote} and a {@code local} run made minutes apart hard to compare; the median
 * of the differences is the overhead issue 7 bounds (≤ 5 ms).
 */
final class ServerOverhead implements Target.ExtraScenarios {

  static final String NAME = "exec_true_server_minus_engine";
  private static final Command TRUE = Command.argv("true");

  private final RemoteSandbox remote;
  private final LocalSandbox engine;
  private Workspace throughServer;
  private Workspace throughEngine;
  private int round;

  ServerOverhead(RemoteSandbox remote, LocalSandbox engine) {
    this.remote = remote;
    this.engine = engine;
  }

  @Override
  public List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup) {
    return List.of(new WorkspaceBench.Scenario(NAME, warmup, iterations, this::difference));
  }

  private long[] difference() {
    if (throughServer == null) {
      throughServer = Workspace.of(remote.newBackend());
      WorkspaceRef ref = throughServer.open();
      // the server's sandboxes are the engine's, under the same id
      throughEngine =
          Workspace.of(
              engine
                  .backend(new WorkspaceRef(LocalSandbox.NAME, ref.id()))
                  .orElseThrow(() -> new IllegalStateException("the engine does not know " + ref)));
    }
    boolean engineFirst = round++ % 2 == 0;
    long engineNanos;
    long serverNanos;
    if (engineFirst) {
      engineNanos = timed(throughEngine);
      serverNanos = timed(throughServer);
    } else {
      serverNanos = timed(throughServer);
      engineNanos = timed(throughEngine);
    }
    return new long[] {serverNanos - engineNanos};
  }

  private static long timed(Workspace ws) {
    long start = System.nanoTime();
    CommandResult result = ws.run(TRUE);
    long elapsed = System.nanoTime() - start;
    if (!result.succeeded()) {
      throw new IllegalStateException("true failed: " + result);
    }
    return elapsed;
  }

  @Override
  public void close() {
    if (throughServer != null) {
      throughServer.ref().ifPresent(remote::destroy);
    }
  }
}
