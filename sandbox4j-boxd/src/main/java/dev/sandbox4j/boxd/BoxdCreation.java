package dev.sandbox4j.boxd;

import dev.sandbox4j.boxd.BoxdCalls.Retry;
import dev.sandbox4j.boxd.BoxdCalls.Target;
import dev.sandbox4j.boxd.internal.proto.CreateVmFromSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.CreateVmRequest;
import dev.sandbox4j.boxd.internal.proto.CreateVmResponse;
import dev.sandbox4j.boxd.internal.proto.EnvVar;
import dev.sandbox4j.boxd.internal.proto.GetVmResponse;
import dev.sandbox4j.boxd.internal.proto.SrfConfig;
import dev.sandbox4j.boxd.internal.proto.VmConfig;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.function.Consumer;

/**
 * Makes the machine a workspace stands on: creates one as the builder configured it (isolated,
 * sized, from an image or a ready snapshot, with the working directory made), or checks and wakes
 * the one a ref names. Stateless; thread-safe.
 */
final class BoxdCreation {

  private final BoxdCalls calls;
  private final BoxdMachines machines;
  private final BoxdSnapshots snapshots;
  private final BoxdOptions options;

  BoxdCreation(
      BoxdCalls calls, BoxdMachines machines, BoxdSnapshots snapshots, BoxdOptions options) {
    this.calls = calls;
    this.machines = machines;
    this.snapshots = snapshots;
    this.options = options;
  }

  /**
   * Creates a machine as configured and waits until it runs. {@code onId} learns the id as soon as
   * boxd returns it, before the machine runs.
   */
  String create(Consumer<String> onId) {
    options.beforeCreate().run();
    CreateVmResponse created;
    if (options.snapshot() != null) {
      snapshots.requireReady(options.snapshot());
      CreateVmFromSnapshotRequest.Builder request =
          CreateVmFromSnapshotRequest.newBuilder()
              .setSnapshot(options.snapshot())
              .setIsolated(true)
              .setConfig(VmConfig.newBuilder().setSrf(srf()));
      if (options.name() != null) {
        request.setName(options.name());
      }
      try {
        created =
            calls.unary(
                "CreateVmFromSnapshot",
                Target.snapshot(options.snapshot()),
                Retry.NEVER,
                s -> s.createVmFromSnapshot(request.build()));
      } catch (WorkspaceException e) {
        if (e.getCause() instanceof StatusRuntimeException s
            && s.getStatus().getCode() == io.grpc.Status.Code.FAILED_PRECONDITION) {
          throw new WorkspaceUnavailableException(
              "boxd's snapshot " + options.snapshot() + " cannot be used yet: " + e.getMessage(),
              e);
        }
        throw e;
      }
    } else {
      CreateVmRequest.Builder request =
          CreateVmRequest.newBuilder()
              .setIsolated(true)
              .setConfig(
                  VmConfig.newBuilder()
                      .setVcpu(options.vcpu() == null ? 0 : options.vcpu())
                      .setMemoryBytes(
                          options.vcpu() == null ? 0 : options.vcpu() * 4L * 1024 * 1024 * 1024)
                      .setSrf(srf()));
      if (options.name() != null) {
        request.setName(options.name());
      }
      if (options.image() != null) {
        request.setImageRef(options.image());
      }
      options
          .env()
          .forEach((k, v) -> request.addEnv(EnvVar.newBuilder().setKey(k).setValue(v).build()));
      created = calls.unary("CreateVm", Target.NONE, Retry.NEVER, s -> s.createVm(request.build()));
    }
    String id = created.getVmId();
    if (id.isEmpty() || !BoxdSandbox.ID.matcher(id).matches()) {
      throw new WorkspaceException("boxd answered CreateVm with an unusable machine id: " + id);
    }
    onId.accept(id);
    machines.awaitRunning(id);
    if (!options.workingDirectory().equals(BoxdSandbox.DEFAULT_WORKING_DIRECTORY)) {
      makeWorkingDirectory(id);
    }
    return id;
  }

  /** An existing machine: isolated, on no network, and running once this returns. */
  void attach(String vmId) {
    GetVmResponse vm = machines.get(vmId);
    BoxdMachines.requireIsolated(vm, "attach to");
    machines.awaken(vmId);
    if (!options.workingDirectory().equals(BoxdSandbox.DEFAULT_WORKING_DIRECTORY)) {
      String dir = options.workingDirectory();
      CommandResult r =
          BoxdExec.run(
              calls,
              vmId,
              "test -d " + BoxdCommandLine.quote(dir),
              RunOptions.withTimeout(Duration.ofMinutes(1)),
              options.noOutputLimit());
      if (r.exitCode() != 0) {
        throw new WorkspaceException(
            "the working directory "
                + dir
                + " does not exist in boxd machine "
                + vmId
                + " (it is created only on a new machine)");
      }
    }
  }

  private SrfConfig srf() {
    SrfConfig.Builder srf = SrfConfig.newBuilder();
    if (options.autoSuspendTimeout() != null) {
      srf.setAutoSuspendTimeoutSecs((int) options.autoSuspendTimeout().toSeconds());
    }
    if (options.autoDestroyTimeout() != null) {
      srf.setAutoDestroyTimeoutSecs((int) options.autoDestroyTimeout().toSeconds());
    }
    return srf.build();
  }

  private void makeWorkingDirectory(String id) {
    String dir = options.workingDirectory();
    CommandResult r =
        BoxdExec.run(
            calls,
            id,
            "mkdir -p -- "
                + BoxdCommandLine.quote(dir)
                + " 2>&1 || sudo sh -c "
                + BoxdCommandLine.quote(
                    "mkdir -p -- "
                        + BoxdCommandLine.quote(dir)
                        + " && chown boxd: "
                        + BoxdCommandLine.quote(dir)),
            RunOptions.withTimeout(Duration.ofMinutes(1)),
            options.noOutputLimit());
    if (r.exitCode() != 0) {
      throw new WorkspaceException(
          "could not create the working directory "
              + dir
              + " in boxd machine "
              + id
              + ": "
              + r.stdoutText()
              + r.stderrText());
    }
  }
}
