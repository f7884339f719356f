package dev.sandbox4j.boxd;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Status;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * One boxd machine as a workspace: created on first use (or attached to, for a ref), woken when a
 * command finds it parked, and reached by commands only; {@code Workspace} builds its files from
 * commands. The machine's id is guarded by {@code this}: concurrent first use creates one machine.
 */
final class BoxdBackend implements WorkspaceBackend, SupportsCommands {

  private final BoxdSandbox provider;

  /** Set as soon as creation returns, before the machine runs: the ref is known from then on. */
  private volatile String vmId;

  private boolean acquired;

  BoxdBackend(BoxdSandbox provider, String vmId) {
    this.provider = provider;
    this.vmId = vmId;
  }

  @Override
  public Optional<WorkspaceRef> ref() {
    return Optional.ofNullable(vmId).map(id -> new WorkspaceRef(BoxdSandbox.NAME, id));
  }

  @Override
  public String workingDirectory() {
    acquire();
    return provider.workingDirectoryOption();
  }

  /** Creates the machine, or checks and wakes the one the ref names, once. */
  private synchronized String acquire() {
    if (acquired) {
      return vmId;
    }
    if (vmId == null) {
      vmId = provider.create(id -> vmId = id);
    } else {
      provider.attach(vmId);
    }
    acquired = true;
    return vmId;
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    String id = acquire();
    Map<String, String> env = new LinkedHashMap<>(provider.env());
    env.putAll(options.env());
    String line = BoxdCommandLine.of(command, provider.workingDirectoryOption(), env);
    if (options.stdin().isPresent()) {
      // boxd may have parked it meanwhile (auto-suspend: 30 s without network traffic, or another
      // client), and an exec refused for that may already have read stdin from its source, which
      // cannot be sent twice: one GetVm first (and a wake if needed) costs less than that
      provider.machines().awaken(id);
    }
    boolean woken = false;
    boolean renewed = false;
    while (true) {
      try {
        return provider.exec(id, line, options);
      } catch (BoxdExec.StreamFailure e) {
        // Both refusals come before the command starts, so sending it again runs it once; but
        // stdin already read from its source is gone.
        Status.Code code = e.status.getCode();
        if (e.stdinTouched
            && (code == Status.Code.FAILED_PRECONDITION || code == Status.Code.UNAUTHENTICATED)) {
          throw new WorkspaceException(
              "boxd refused the command ("
                  + code
                  + ") after its stdin was read: it was not run, and cannot be sent again",
              e);
        }
        if (code == Status.Code.FAILED_PRECONDITION && !woken) {
          // not running (boxd never wakes a machine for an API call): wake it, then once more
          provider.machines().awaken(id);
          woken = true;
        } else if (code == Status.Code.UNAUTHENTICATED && !renewed && provider.renewableToken()) {
          renewed = true; // the exec forgot the refused token: the next one is fresh
        } else {
          throw explain(id, e);
        }
      }
    }
  }

  /** The exception for a failed stream: unavailable if the machine is gone, else as it was. */
  private WorkspaceException explain(String id, BoxdExec.StreamFailure e) {
    if (e.status.getCode() == Status.Code.NOT_FOUND || gone(id)) {
      return new WorkspaceUnavailableException(
          "the boxd machine " + id + " is gone (" + e.getMessage() + ")", e);
    }
    return new WorkspaceException(e.getMessage(), e);
  }

  /** Whether the machine is known to be gone; a check that fails itself says nothing. */
  private boolean gone(String id) {
    try {
      return provider.machines().find(id).isEmpty();
    } catch (WorkspaceException | IllegalArgumentException checkFailed) {
      return false; // the stream's own failure is the one to report
    }
  }

  @Override
  public String toString() {
    return "BoxdBackend[" + ref().map(WorkspaceRef::toString).orElse("not created") + "]";
  }
}
