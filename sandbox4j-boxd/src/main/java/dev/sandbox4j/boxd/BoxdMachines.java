package dev.sandbox4j.boxd;

import dev.sandbox4j.boxd.BoxdCalls.Retry;
import dev.sandbox4j.boxd.BoxdCalls.Target;
import dev.sandbox4j.boxd.internal.proto.GetVmRequest;
import dev.sandbox4j.boxd.internal.proto.GetVmResponse;
import dev.sandbox4j.boxd.internal.proto.ResumeVmRequest;
import dev.sandbox4j.boxd.internal.proto.StartVmRequest;
import dev.sandbox4j.boxd.internal.proto.WakeVmRequest;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CancellationException;

/**
 * A machine's state and the moves between states. boxd creates asynchronously (creation returns as
 * soon as the machine is scheduled) and never wakes a parked machine by itself for an API call: a
 * suspended one needs {@code ResumeVm}, a hibernated one {@code WakeVm}, a stopped or failed one
 * {@code StartVm}. A destroyed machine may keep a record with status {@code destroyed} for a
 * moment, or be NOT_FOUND at once; both are gone.
 */
final class BoxdMachines {

  static final String RUNNING = "running";
  static final Set<String> GONE = Set.of("destroying", "destroyed");

  private final BoxdCalls calls;
  private final Duration readyTimeout;

  BoxdMachines(BoxdCalls calls, Duration readyTimeout) {
    this.calls = calls;
    this.readyTimeout = readyTimeout;
  }

  /** The machine, or empty if it is gone. */
  Optional<GetVmResponse> find(String vmId) {
    try {
      GetVmResponse vm = get(vmId);
      return Optional.of(vm);
    } catch (WorkspaceUnavailableException gone) {
      return Optional.empty();
    }
  }

  /**
   * @throws WorkspaceUnavailableException if the machine is gone
   */
  GetVmResponse get(String vmId) {
    GetVmResponse vm =
        calls.unary(
            "GetVm",
            Target.machine(vmId),
            Retry.SAFE,
            s -> s.getVm(GetVmRequest.newBuilder().setVmId(vmId).build()));
    if (GONE.contains(vm.getStatus())) {
      throw new WorkspaceUnavailableException(
          "the boxd machine " + vmId + " is gone (status " + vm.getStatus() + ")");
    }
    return vm;
  }

  /**
   * Brings the machine to {@code running}: resumes, wakes or starts it as its state needs, then
   * waits until it runs.
   *
   * @throws WorkspaceUnavailableException if the machine is gone
   */
  GetVmResponse awaken(String vmId) {
    GetVmResponse vm = get(vmId);
    switch (vm.getStatus()) {
      case RUNNING -> {
        return vm; // the common case costs one GetVm
      }
      case "suspended", "standby" ->
          calls.unary(
              "ResumeVm",
              Target.machine(vmId),
              Retry.SAFE,
              s -> s.resumeVm(ResumeVmRequest.newBuilder().setVmId(vmId).build()));
      case "hibernated" ->
          calls.unary(
              "WakeVm",
              Target.machine(vmId),
              Retry.SAFE,
              s -> s.wakeVm(WakeVmRequest.newBuilder().setVmId(vmId).build()));
      case "stopped", "failed" ->
          calls.unary(
              "StartVm",
              Target.machine(vmId),
              Retry.SAFE,
              s -> s.startVm(StartVmRequest.newBuilder().setVmId(vmId).build()));
      default -> {
        // running already, or on its way (pending, starting, stopping: waited for below)
      }
    }
    return awaitRunning(vmId);
  }

  /**
   * Polls until the machine runs, as boxd's SDKs' {@code waitUntilReady} does.
   *
   * @throws WorkspaceUnavailableException if it is gone
   * @throws WorkspaceException if it failed, or is not running within the ready timeout
   */
  GetVmResponse awaitRunning(String vmId) {
    long end = System.nanoTime() + readyTimeout.toNanos();
    long pollMillis = 50;
    while (true) {
      GetVmResponse vm = get(vmId);
      String status = vm.getStatus();
      if (status.equals(RUNNING)) {
        return vm;
      }
      if (status.equals("failed")) {
        throw new WorkspaceException("the boxd machine " + vmId + " failed to start");
      }
      if (System.nanoTime() - end >= 0) {
        throw new WorkspaceException(
            "the boxd machine "
                + vmId
                + " was not running within "
                + readyTimeout
                + " (status "
                + status
                + ")");
      }
      if (status.equals("stopped")) {
        // it stopped while we waited (or was stopping): start it again
        calls.unary(
            "StartVm",
            Target.machine(vmId),
            Retry.SAFE,
            s -> s.startVm(StartVmRequest.newBuilder().setVmId(vmId).build()));
      }
      try {
        Thread.sleep(pollMillis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CancellationException("interrupted waiting for boxd machine " + vmId);
      }
      pollMillis = Math.min(1000, pollMillis * 2);
    }
  }

  /**
   * Refuses a machine the seed's BoxdSandbox refuses: one that is not isolated, or is on a named
   * network (its code could reach the organization's other machines).
   */
  static void requireIsolated(GetVmResponse vm, String what) {
    if (!vm.getIsolated()) {
      throw new WorkspaceException(
          "refusing to " + what + " the boxd machine " + vm.getVmId() + ": it is not isolated");
    }
    if (vm.getNetworksCount() > 0) {
      throw new WorkspaceException(
          "refusing to "
              + what
              + " the boxd machine "
              + vm.getVmId()
              + ": it is on the boxd network(s) "
              + vm.getNetworksList());
    }
  }
}
