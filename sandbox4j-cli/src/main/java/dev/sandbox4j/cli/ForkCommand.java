package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
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

/** {@code sandbox4j fork ID}: a new sandbox with a copy of another's files and processes. */
@Command(
    name = "fork",
    mixinStandardHelpOptions = true,
    description = {
      "Creates a sandbox with a copy of a sandbox's files (same image, size and labels) and"
          + " of its running processes, and prints its ref; afterwards the two change and run"
          + " independently.",
      "Progress goes to stderr while it works (see --no-progress, --quiet); then a line says whether processes were copied (checkpoint/restore): if not, why"
          + " (unavailable on this host, the sandbox was stopped...), and if so, which were left"
          + " out (commands still attached, like exec without --detach). A running sandbox is"
          + " frozen while it is copied; a suspended one is resumed."
    })
final class ForkCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(
      paramLabel = "ID",
      description = "The sandbox to fork (local, or remote with a server).")
  String ref;

  @Option(
      names = "--files-only",
      description = "Copy the files only, not the processes: faster (no checkpoint).")
  boolean filesOnly;

  @Option(
      names = "--json",
      description =
          "Print {\"provider\",\"id\",\"processesCopied\",\"reason\",\"notCarried\"} instead,"
              + " and nothing on stderr (no progress either).")
  boolean json;

  @Override
  public Integer call() {
    WorkspaceRef parent = StateCommands.machineRefs(root, spec, List.of(ref)).getFirst();
    ForkResult fork;
    try (var task = root.task("forking " + parent, true, json)) {
      fork = root.machinesOf(parent).fork(parent, filesOnly);
    }
    if (json) {
      Map<String, Object> fields = new LinkedHashMap<>();
      fields.put("provider", fork.ref().provider());
      fields.put("id", fork.ref().id());
      fields.put("processesCopied", fork.processesCopied());
      fields.put("reason", fork.reason());
      fields.put("notCarried", fork.notCarried());
      root.context().out().println(Json.write(fields));
    } else {
      root.context().out().println(fork.ref());
      if (!fork.processesCopied()) {
        root.context().err().println("sandbox4j: processes were not copied: " + fork.reason());
      } else if (fork.notCarried().isEmpty()) {
        root.context().err().println("sandbox4j: processes copied");
      } else {
        root.context()
            .err()
            .println(
                "sandbox4j: processes copied, except commands still attached: "
                    + String.join(", ", fork.notCarried()));
      }
    }
    return ExitCodes.OK;
  }
}
