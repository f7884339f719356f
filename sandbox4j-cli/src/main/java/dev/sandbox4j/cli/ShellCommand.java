package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.List;
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
      "Needs a terminal on stdin and stdout; to run a command from a script, use exec.",
      "With a server (--server or $SANDBOX4J_URL) there is no terminal: the server's API has"
          + " none. The login shell then reads commands from stdin, line by line, and its output"
          + " streams back, without a prompt, line editing or job control; end it with exit or"
          + " end-of-file (Ctrl-D)."
    })
final class ShellCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(
      index = "0",
      paramLabel = "ID",
      description = "The sandbox: its ref or a bare id (local, or remote with a server).")
  String id;

  @Option(
      names = {"-w", "--workdir"},
      paramLabel = "PATH",
      description = "The absolute directory the shell starts in (default: /home/sandbox).")
  String workdir;

  @Override
  public Integer call() {
    WorkspaceRef ref;
    try {
      ref = StateCommands.machineRefs(root, spec, List.of(id)).getFirst();
    } catch (ParameterException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage() + ": use exec", e);
    }
    try {
      return root.machines().shell(ref, workdir, root.context());
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
  }
}
