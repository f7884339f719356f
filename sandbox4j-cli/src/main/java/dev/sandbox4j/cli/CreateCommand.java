package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j create}: creates a workspace and prints its ref. */
@Command(
    name = "create",
    mixinStandardHelpOptions = true,
    description = "Creates a workspace and prints its ref (provider:id) on stdout.")
final class CreateCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description = "Where to create it (default: ${DEFAULT-VALUE}).",
      defaultValue = Providers.DEFAULT)
  String provider;

  @Option(
      names = {"-e", "--env"},
      paramLabel = "KEY=VALUE",
      description =
          "A variable every command in the workspace gets (repeatable), for providers that"
              + " keep it; host workspaces do not: pass --env to each exec instead.")
  Map<String, String> env;

  @Option(
      names = "--json",
      description = "Print {\"provider\":...,\"id\":...,\"workingDirectory\":...} instead.")
  boolean json;

  @Override
  public Integer call() {
    WorkspaceProvider workspaces = root.provider(spec, provider, env == null ? Map.of() : env);
    if (env != null && !env.isEmpty() && !root.providers().keepsEnv(provider)) {
      throw new ParameterException(
          spec.commandLine(),
          provider
              + " workspaces do not keep an environment between commands: pass --env to each"
              + " 'sandbox4j exec' instead");
    }
    root.warnIfNotIsolated(provider);
    Workspace workspace = Workspace.of(workspaces.newBackend());
    WorkspaceRef ref = workspace.open();
    if (json) {
      Map<String, String> fields = new LinkedHashMap<>();
      fields.put("provider", ref.provider());
      fields.put("id", ref.id());
      fields.put("workingDirectory", workspace.workingDirectory());
      root.context().out().println(Json.write(fields));
    } else {
      root.context().out().println(ref);
    }
    return ExitCodes.OK;
  }
}
