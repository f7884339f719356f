package dev.sandbox4j.mcp;

import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Path;

/**
 * Serves the Coder tools over stdio, bound to a new workspace: {@code host DIR}, a host workspace
 * under DIR; {@code local}, a local sandbox, destroyed when stdin ends.
 */
final class ServerMain {
  private ServerMain() {}

  public static void main(String[] args) {
    if (args[0].equals("local")) {
      LocalSandbox sandboxes = new LocalSandbox();
      WorkspaceBackend backend = sandboxes.newBackend();
      try {
        serve(backend);
      } finally {
        backend.ref().ifPresent(sandboxes::destroy);
      }
    } else {
      serve(HostWorkspaceProvider.create(Path.of(args[1])).newBackend());
    }
  }

  private static void serve(WorkspaceBackend backend) {
    McpToolServer.serveStdio(
        Workspace.of(backend), Coder.builder().repoContext(false).build().tools());
  }
}
