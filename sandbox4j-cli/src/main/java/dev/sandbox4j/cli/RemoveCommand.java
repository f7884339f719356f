package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j rm ID...}: destroys sandboxes and workspaces. */
@Command(
    name = "rm",
    mixinStandardHelpOptions = true,
    description = {
      "Destroys sandboxes: kills their processes and deletes their files, then prints each ref.",
      "A ref whose sandbox is already gone is not an error. Every ref is checked before any"
          + " sandbox is destroyed."
    })
final class RemoveCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(
      arity = "1..*",
      paramLabel = "ID",
      description = "Refs (provider:id) or bare local ids to destroy.")
  List<String> refs;

  @Option(
      names = "--json",
      description =
          "Print a JSON array of {\"provider\",\"id\"}, one per sandbox destroyed, instead of"
              + " their refs.")
  boolean json;

  @Override
  public Integer call() {
    List<WorkspaceRef> parsed = refs.stream().map(text -> root.parseRef(spec, text)).toList();
    for (WorkspaceRef ref : parsed) {
      root.backend(spec, root.provider(spec, ref.provider()), ref); // validates the id; no I/O
    }
    List<Map<String, Object>> destroyed = new ArrayList<>();
    for (WorkspaceRef ref : parsed) {
      root.providers().open(ref).destroy(ref);
      if (json) {
        destroyed.add(Json.ref(ref));
      } else {
        root.context().out().println(ref);
      }
    }
    if (json) {
      root.context().out().println(Json.write(destroyed));
    }
    return ExitCodes.OK;
  }
}
