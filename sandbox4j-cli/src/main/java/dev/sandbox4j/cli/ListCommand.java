package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j ls}: the refs of existing workspaces, one a line. */
@Command(
    name = "ls",
    mixinStandardHelpOptions = true,
    description = "Lists workspaces, one ref (provider:id) a line, sorted by provider and id.")
final class ListCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description = "Only this provider's workspaces (default: every provider's).")
  String provider;

  @Option(
      names = "--json",
      description = "Print a JSON array of {\"provider\":...,\"id\":...} objects instead.")
  boolean json;

  @Override
  public Integer call() {
    List<String> names = provider == null ? root.providers().names() : List.of(provider);
    List<WorkspaceRef> refs = new ArrayList<>();
    for (String name : names) {
      refs.addAll(root.providers().list(root.provider(spec, name, Map.of())));
    }
    PrintStream out = root.context().out();
    if (json) {
      out.println(Json.write(refs));
    } else {
      refs.forEach(out::println);
    }
    return ExitCodes.OK;
  }
}
