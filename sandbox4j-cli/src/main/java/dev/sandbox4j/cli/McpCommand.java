package dev.sandbox4j.cli;

import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.ToolContext;
import dev.sandbox4j.agent.ToolDefinition;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.mcp.McpToolServer;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j mcp}: the Coder tools, bound to one sandbox, as an MCP server on stdio. */
@Command(
    name = "mcp",
    mixinStandardHelpOptions = true,
    description = {
      "Serves the Coder tools (read_file, write_file, edit_file, list_directory, find_files, grep,"
          + " shell, check_command, stop_command) as an MCP server on stdin and stdout, every call"
          + " acting in one sandbox, until stdin ends. For an MCP client to start as a subprocess.",
      "Without --sandbox, a new sandbox is created on the first tool call and its ref printed on"
          + " stderr; it keeps running afterwards: remove it with 'sandbox4j rm REF'."
    })
final class McpCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--sandbox",
      paramLabel = "REF",
      description = "The sandbox every call acts in: provider:id or a bare local id.")
  String sandbox;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description =
          "Where the new sandbox is created: local (isolated), remote (a server's), docker (a Docker daemon's containers) or host (not isolated). Default:"
              + " remote with a server (--server), else local.")
  String provider;

  @Mixin IsolationOption isolation;

  @Override
  public Integer call() {
    provider = root.providerOrDefault(provider);
    PrintStream err = root.context().err();
    Workspace workspace;
    if (sandbox != null) {
      WorkspaceRef ref = root.parseRef(spec, sandbox);
      if (spec.commandLine().getParseResult().hasMatchedOption("--provider")
          && !provider.equals(ref.provider())) {
        throw new ParameterException(
            spec.commandLine(), "--provider " + provider + " does not match the sandbox " + ref);
      }
      isolation.refuseFor(spec, ref);
      root.warnIfNotIsolated(ref.provider());
      WorkspaceProvider opened = root.provider(spec, ref.provider());
      workspace = Workspace.of(root.backend(spec, opened, ref));
    } else {
      root.warnIfNotIsolated(provider);
      workspace =
          Workspace.of(
              root.provider(
                      spec,
                      provider,
                      Providers.Settings.DEFAULTS.withIsolation(isolation.isolation))
                  .newBackend());
    }
    List<Tool> tools = Coder.builder().repoContext(false).build().tools();
    if (sandbox == null) {
      AtomicBoolean shown = new AtomicBoolean();
      tools = tools.stream().map(t -> (Tool) new NamingCreation(t, workspace, err, shown)).toList();
    }
    McpToolServer.serveStdio(workspace, tools);
    return ExitCodes.OK;
  }

  /** A tool that, after the call that created the sandbox, names it on stderr. */
  private record NamingCreation(
      Tool tool, Workspace workspace, PrintStream err, AtomicBoolean shown) implements Tool {
    @Override
    public ToolDefinition definition() {
      return tool.definition();
    }

    @Override
    public int maxRetries() {
      return tool.maxRetries();
    }

    @Override
    public String call(ToolContext context, String arguments) throws Exception {
      try {
        return tool.call(context, arguments);
      } finally {
        workspace
            .ref()
            .filter(ref -> shown.compareAndSet(false, true))
            .ifPresent(
                ref -> {
                  err.println(
                      "sandbox4j: created sandbox "
                          + ref
                          + " (it keeps running: sandbox4j rm "
                          + ref
                          + ")");
                  err.flush();
                });
      }
    }
  }
}
