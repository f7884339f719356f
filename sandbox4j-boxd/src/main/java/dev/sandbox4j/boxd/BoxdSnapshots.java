package dev.sandbox4j.boxd;

import dev.sandbox4j.boxd.BoxdCalls.Retry;
import dev.sandbox4j.boxd.BoxdCalls.Target;
import dev.sandbox4j.boxd.internal.proto.CreateSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.DeleteSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.GetSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.SnapshotInfo;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.time.Duration;
import java.util.concurrent.CancellationException;

/**
 * boxd's snapshots: saved from a running machine, {@code pending} until stored, then {@code ready}
 * (or {@code failed}); re-saving under a name makes a new version, which new machines start from.
 */
final class BoxdSnapshots {

  private final BoxdCalls calls;

  BoxdSnapshots(BoxdCalls calls) {
    this.calls = calls;
  }

  /**
   * Saves running machine {@code vmId} as {@code name} and polls until the snapshot is ready.
   *
   * @throws WorkspaceException if it failed, or is not ready within {@code timeout}
   */
  SnapshotInfo save(String vmId, String name, Duration timeout) {
    calls.unary(
        "CreateSnapshot",
        Target.machine(vmId),
        Retry.NEVER,
        s ->
            s.createSnapshot(CreateSnapshotRequest.newBuilder().setVm(vmId).setName(name).build()));
    long end = System.nanoTime() + timeout.toNanos();
    long pollMillis = 100;
    while (true) {
      SnapshotInfo info = get(name);
      switch (info.getStatus()) {
        case "ready" -> {
          return info;
        }
        case "failed" -> throw new WorkspaceException("boxd failed to save snapshot " + name);
        default -> {
          if (System.nanoTime() - end >= 0) {
            throw new WorkspaceException(
                "boxd's snapshot " + name + " was not ready within " + timeout);
          }
          try {
            Thread.sleep(pollMillis);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException("interrupted waiting for boxd's snapshot " + name);
          }
          pollMillis = Math.min(2000, pollMillis * 2);
        }
      }
    }
  }

  /** An unknown snapshot, or one still being saved, is unavailable, as the seed says. */
  void requireReady(String name) {
    String status = get(name).getStatus();
    if (!status.equals("ready")) {
      throw new WorkspaceUnavailableException(
          "boxd's snapshot "
              + name
              + " is "
              + status
              + ", not ready: a machine cannot start from it");
    }
  }

  /** Whether there was such a snapshot. */
  boolean remove(String name) {
    try {
      calls.unary(
          "DeleteSnapshot",
          Target.snapshot(name),
          Retry.SAFE,
          s -> s.deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(name).build()));
      return true;
    } catch (WorkspaceUnavailableException none) {
      return false;
    }
  }

  /**
   * @throws WorkspaceUnavailableException if there is no such snapshot
   */
  SnapshotInfo get(String name) {
    return calls.unary(
        "GetSnapshot",
        Target.snapshot(name),
        Retry.SAFE,
        s -> s.getSnapshot(GetSnapshotRequest.newBuilder().setName(name).build()).getSnapshot());
  }
}
