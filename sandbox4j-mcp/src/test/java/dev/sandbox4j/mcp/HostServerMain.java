package dev.sandbox4j.mcp;

import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Path;

/** Serves the Coder tools over stdio, bound to a new host workspace under {@code args[0]}. */
final class HostServerMain {
  private HostServerMain() {}

  public static void main(String[] args) {
    HostWorkspaceProvider provider = HostWorkspaceProvider.create(Path.of(args[0]));
    McpToolServer.serveStdio(
        Workspace.of(provider.newBackend()), Coder.builder().repoContext(false).build().tools());
  }
}
