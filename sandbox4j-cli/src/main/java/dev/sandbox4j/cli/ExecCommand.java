package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.PrintStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j exec ID -- CMD...}: runs one command and exits with its status. */
@CommandLine.Command(
    name = "exec",
    mixinStandardHelpOptions = true,
    customSynopsis = "sandbox4j exec [OPTIONS] ID -- CMD...",
    description = {
      "Runs a command in a workspace, streams its stdout and stderr as they arrive, and exits"
          + " with its exit status.",
      "",
      "Put the command after '--'. Without --shell it is an argv run without a shell;"
          + " with --shell it is one script string for /bin/sh -c.",
      "The command's stdin is at end-of-file unless --stdin is given."
    })
final class ExecCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(
      index = "0",
      paramLabel = "ID",
      description =
          "A sandbox: its ref (provider:id, as create and ls print it) or a bare local id; or"
              + " 'new' to create one, whose ref is printed to stderr.")
  String id;

  @Parameters(
      index = "1..*",
      arity = "1..*",
      paramLabel = "CMD",
      description = "The program and its arguments, or with --shell one script.")
  List<String> command;

  @Option(names = "--shell", description = "Run CMD, a single string, with /bin/sh -c.")
  boolean shell;

  @Option(
      names = {"-e", "--env"},
      paramLabel = "KEY=VALUE",
      description = "Set a variable for this command (repeatable).")
  Map<String, String> env;

  @Option(
      names = "--timeout",
      paramLabel = "DURATION",
      converter = DurationConverter.class,
      description =
          "Kill the command after this long and exit 124: e.g. 30s, 500ms, 2m, 1h or PT30S"
              + " (a bare number means seconds). Default: none.")
  Duration timeout;

  @Option(
      names = "--output-limit",
      paramLabel = "SIZE",
      converter = ByteSizeConverter.class,
      description =
          "Kill the command and exit 125 once stdout and stderr together pass this many bytes:"
              + " e.g. 100M, 512K. Default: 10M.")
  Long outputLimit;

  @Option(
      names = {"-w", "--workdir"},
      paramLabel = "PATH",
      description =
          "The absolute directory the command starts in (default: /home/sandbox); it must exist"
              + " in the sandbox. Local and remote sandboxes only.")
  String workdir;

  @Option(
      names = {"-i", "--stdin"},
      description = "Feed this process's stdin to the command.")
  boolean stdin;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description =
          "Where 'new' creates the workspace: local (isolated), remote (a server's), docker (a Docker daemon's containers) or host (not isolated). Default:"
              + " remote with a server (--server), else local.")
  String provider;

  @Mixin IsolationOption isolation;

  @Override
  public Integer call() {
    provider = root.providerOrDefault(provider);
    Command toRun = command();
    RunOptions options = runOptions();
    boolean fresh = SandboxCommand.NEW.equals(id);
    WorkspaceRef ref = fresh ? null : root.parseRef(spec, id);
    if (ref != null && spec.commandLine().getParseResult().hasMatchedOption("--provider")) {
      if (!ref.provider().equals(provider)) {
        throw new ParameterException(
            spec.commandLine(),
            "--provider " + provider + " does not match the ref " + ref + "; leave it out");
      }
    }
    if (!fresh) {
      isolation.refuseFor(spec, ref);
    }
    String providerName = fresh ? provider : ref.provider();
    WorkspaceProvider workspaces =
        root.provider(
            spec,
            providerName,
            Providers.Settings.DEFAULTS
                .withWorkingDirectory(workdir)
                .withIsolation(isolation.isolation));
    Workspace workspace =
        Workspace.of(fresh ? workspaces.newBackend() : root.backend(spec, workspaces, ref));

    root.warnIfNotIsolated(providerName);
    if (fresh) {
      WorkspaceRef created;
      try (var task = root.task(root.creating(providerName), false, false)) {
        created = workspace.open();
      }
      root.context()
          .err()
          .println(
              "Created "
                  + providerName
                  + (root.providers().isolates(providerName) ? " sandbox " : " workspace ")
                  + created);
    }
    CommandResult result = workspace.run(toRun, options);
    return result.exitCode();
  }

  private Command command() {
    try {
      if (!shell) {
        return Command.argv(command);
      }
      if (command.size() != 1) {
        throw new IllegalArgumentException(
            "--shell takes one script string, got "
                + command.size()
                + " arguments: quote the script, e.g. -- 'echo a; echo b'");
      }
      return Command.shell(command.getFirst());
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
  }

  private RunOptions runOptions() {
    PrintStream out = root.context().out();
    PrintStream err = root.context().err();
    try {
      RunOptions.Builder b =
          RunOptions.builder()
              .onStdout(chunk -> forward(out, chunk))
              .onStderr(chunk -> forward(err, chunk));
      if (env != null) {
        b.env(env);
      }
      if (timeout != null) {
        b.timeout(timeout);
      }
      if (outputLimit != null) {
        b.outputLimit(outputLimit);
      }
      if (stdin) {
        b.stdin(root.context().in());
      }
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
  }

  private static void forward(PrintStream stream, byte[] chunk) {
    stream.write(chunk, 0, chunk.length);
    stream.flush();
  }
}
