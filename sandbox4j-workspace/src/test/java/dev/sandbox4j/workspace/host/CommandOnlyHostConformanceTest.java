package dev.sandbox4j.workspace.host;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.Optional;

/**
 * The whole contract against host workspaces seen through commands only, so that every file
 * operation goes through the file system {@link Workspace} builds from commands.
 */
class CommandOnlyHostConformanceTest extends HostWorkspaceConformanceTest {

  @Override
  protected Workspace workspaceOf(WorkspaceBackend backend) {
    Workspace ws = Workspace.of(new CommandsOnly(backend));
    if (ws.backend() instanceof SupportsFileSystem) {
      throw new AssertionError("the wrapper must hide the native file system");
    }
    return ws;
  }

  /** Exposes the required core and commands, nothing else. */
  private record CommandsOnly(WorkspaceBackend inner)
      implements WorkspaceBackend, SupportsCommands {
    @Override
    public Optional<WorkspaceRef> ref() {
      return inner.ref();
    }

    @Override
    public String workingDirectory() {
      return inner.workingDirectory();
    }

    @Override
    public CommandResult run(Command command, RunOptions options) {
      return ((SupportsCommands) inner).run(command, options);
    }
  }
}
