package dev.sandbox4j.cli;

import java.io.PrintWriter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import picocli.CommandLine;

/** Builds the {@code sandbox4j} command line over a {@link CliContext} and runs it. */
final class Cli {
  private Cli() {}

  /** Runs the CLI with {@code args} and returns its exit code; never throws, never exits. */
  static int run(CliContext context, String... args) {
    CommandLine commandLine = commandLine(context);
    try {
      return commandLine.execute(args);
    } finally {
      commandLine.getOut().flush();
      commandLine.getErr().flush();
      context.out().flush();
      context.err().flush();
    }
  }

  static CommandLine commandLine(CliContext context) {
    SandboxCommand root = new SandboxCommand(context);
    FailureHandler failures = new FailureHandler(context.err(), root::debug);
    CommandLine commandLine =
        new CommandLine(root)
            .setOut(new PrintWriter(context.out(), true))
            .setErr(new PrintWriter(context.err(), true))
            .setParameterExceptionHandler(failures)
            .setExecutionExceptionHandler(failures)
            .setCaseInsensitiveEnumValuesAllowed(true);
    Map<String, String> exitCodes = new LinkedHashMap<>();
    for (String entry : ExitCodes.HELP) {
      int colon = entry.indexOf(':');
      exitCodes.put(entry.substring(0, colon), entry.substring(colon + 1));
    }
    for (CommandLine documented : List.of(commandLine, commandLine.getSubcommands().get("exec"))) {
      documented.getCommandSpec().usageMessage().exitCodeListHeading("%nExit codes:%n");
      documented.getCommandSpec().usageMessage().exitCodeList(exitCodes);
    }
    return commandLine;
  }
}
