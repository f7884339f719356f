package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j rm REF...}: destroys workspaces. */
@Command(
    name = "rm",
    mixinStandardHelpOptions = true,
    description = {
      "Destroys workspaces: kills their processes and deletes their files, then prints each ref.",
      "A ref whose workspace is already gone is not an error. Every ref is checked before any"
          + " workspace is destroyed."
    })
final class RemoveCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(arity = "1..*", paramLabel = "REF", description = "Refs (provider:id) to destroy.")
  List<String> refs;

  @Override
  public Integer call() {
    List<WorkspaceRef> parsed = refs.stream().map(text -> root.parseRef(spec, text)).toList();
    for (WorkspaceRef ref : parsed) {
      try {
        root.providers().open(ref).backend(ref); // validates the id; does no I/O
      } catch (IllegalArgumentException e) {
        throw new ParameterException(spec.commandLine(), e.getMessage(), e);
      }
    }
    for (WorkspaceRef ref : parsed) {
      root.providers().open(ref).destroy(ref);
      root.context().out().println(ref);
    }
    return ExitCodes.OK;
  }
}
