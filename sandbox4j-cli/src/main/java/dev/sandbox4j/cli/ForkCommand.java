package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.ForkResult;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j fork ID}: a new sandbox with a copy of another's files. */
@Command(
    name = "fork",
    mixinStandardHelpOptions = true,
    description = {
      "Creates a sandbox with a copy of a local sandbox's files (same image, size and labels) and"
          + " prints its ref; afterwards the two change independently.",
      "Processes are not copied (that needs checkpoint/restore, which the local engine does not"
          + " do): a line on stderr says so. A running sandbox is frozen while its files are"
          + " copied."
    })
final class ForkCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(paramLabel = "ID", description = "The local sandbox to fork.")
  String ref;

  @Option(
      names = "--json",
      description =
          "Print {\"provider\",\"id\",\"processesCopied\",\"reason\"} instead, and nothing on"
              + " stderr.")
  boolean json;

  @Override
  public Integer call() {
    WorkspaceRef parent = StateCommands.localRefs(root, spec, List.of(ref)).getFirst();
    ForkResult fork = root.providers().local().fork(parent);
    if (json) {
      Map<String, Object> fields = new LinkedHashMap<>();
      fields.put("provider", fork.ref().provider());
      fields.put("id", fork.ref().id());
      fields.put("processesCopied", fork.processesCopied());
      fields.put("reason", fork.reason());
      root.context().out().println(Json.write(fields));
    } else {
      root.context().out().println(fork.ref());
      if (!fork.processesCopied()) {
        root.context().err().println("sandbox4j: processes were not copied: " + fork.reason());
      }
    }
    return ExitCodes.OK;
  }
}
