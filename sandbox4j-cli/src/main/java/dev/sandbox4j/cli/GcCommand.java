package dev.sandbox4j.cli;

import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code sandbox4j gc}: removes what crashes left behind. */
@Command(
    name = "gc",
    mixinStandardHelpOptions = true,
    description = {
      "Removes what crashes left behind in the local engine: sandboxes interrupted while being"
          + " created or destroyed, and containers, mounts, cgroups and image builds that belong to"
          + " nothing. Running sandboxes are never touched. Where a Docker daemon is"
          + " configured, also docker sandboxes' containers that died, or that were created but"
          + " never started by a process that is gone.",
      "Prints a line per thing removed, or 'nothing to clean'."
    })
final class GcCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;

  @Option(
      names = "--json",
      description = "Print {\"removed\":[...]} instead, a line of text per thing removed.")
  boolean json;

  @Override
  public Integer call() {
    List<String> removed = new java.util.ArrayList<>(root.providers().local().gc());
    if (dev.sandbox4j.docker.DockerSandbox.isDaemonConfigured()) {
      try {
        for (String id : new dev.sandbox4j.docker.DockerSandbox().gc()) {
          removed.add("docker sandbox docker:" + id);
        }
      } catch (dev.sandbox4j.workspace.WorkspaceException e) {
        root.context()
            .err()
            .println("sandbox4j: warning: cannot clean docker sandboxes: " + e.getMessage());
      }
    }
    if (json) {
      root.context().out().println(Json.write(Map.of("removed", removed)));
    } else if (removed.isEmpty()) {
      root.context().out().println("nothing to clean");
    } else {
      removed.forEach(line -> root.context().out().println("removed " + line));
    }
    return ExitCodes.OK;
  }
}
