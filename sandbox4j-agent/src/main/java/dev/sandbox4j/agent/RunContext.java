package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.Optional;

/**
 * One run of an agent, as hooks and tools see it. Thread-safe.
 *
 * <p>The run's workspace is chosen once, in this order: the run's {@code workspace} option (a
 * backend, a ref, or {@linkplain RunConfig.Builder#newWorkspace() new}), then the latest ref in the
 * message history, then a fresh one from the first capability that provides workspaces. Nothing is
 * created until something uses it.
 */
public interface RunContext {

  /** The prompt this run answers. */
  String prompt();

  /**
   * The run's workspace. The first call builds its backend (no I/O); the backend creates or
   * attaches on its first operation. A ref of a machine that is gone fails that operation with
   * {@code WorkspaceUnavailableException}, never with a fresh empty machine.
   *
   * @throws AgentException if there is no workspace to use: no option, no ref in history, and no
   *     capability that provides workspaces; or a ref whose provider no capability handles
   */
  Workspace workspace();

  /** The ref of the run's workspace, once it is known (created or attached). */
  Optional<WorkspaceRef> workspaceRef();

  /** The messages so far: the history the run started with, then this run's. */
  List<Message> messages();

  /** What this run has used so far. */
  Usage usage();
}
