package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.Console;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j shell ID}: an interactive login shell in a sandbox. */
@Command(
    name = "shell",
    mixinStandardHelpOptions = true,
    description = {
      "Opens an interactive login shell (bash) as the sandbox user in a local sandbox, with a"
          + " terminal of its own, and exits with its status.",
      "Needs a terminal on stdin and stdout; to run a command from a script, use exec."
    })
final class ShellCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(
      index = "0",
      paramLabel = "ID",
      description = "The sandbox: local:ID or a bare local id.")
  String id;

  @Option(
      names = {"-w", "--workdir"},
      paramLabel = "PATH",
      description = "The absolute directory the shell starts in (default: /home/sandbox).")
  String workdir;

  @Override
  public Integer call() {
    WorkspaceRef ref = root.parseRef(spec, id);
    if (!ref.provider().equals(LocalSandbox.NAME)) {
      throw new ParameterException(
          spec.commandLine(),
          "shell opens local sandboxes only; "
              + ref
              + " is a "
              + ref.provider()
              + " workspace: use exec");
    }
    LocalSandbox sandboxes =
        (LocalSandbox)
            root.provider(
                spec, LocalSandbox.NAME, Providers.Settings.DEFAULTS.withWorkingDirectory(workdir));
    root.backend(spec, sandboxes, ref); // validates the id; no I/O
    Console console = System.console();
    if (console == null || !console.isTerminal()) {
      throw new ParameterException(spec.commandLine(), "shell needs a terminal; use exec");
    }
    return sandboxes.shell(ref);
  }
}
