package dev.sandbox4j.cli;

import java.io.PrintWriter;
import java.util.LinkedHashMap;
import java.util.Map;
import picocli.CommandLine;

/** Builds the {@code sandbox4j} command line over a {@link CliContext} and runs it. */
final class Cli {
  /**
   * The engine logs each sandbox it creates or restarts at INFO; on a command line that is noise on
   * stderr, so only warnings show unless {@code --debug}. Held here: JUL keeps loggers weakly.
   */
  static final java.util.logging.Logger ENGINE_LOG =
      java.util.logging.Logger.getLogger("dev.sandbox4j");

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
    Map<String, String> notExec = new LinkedHashMap<>();
    for (String entry : ExitCodes.HELP) {
      int colon = entry.indexOf(':');
      String code = entry.substring(0, colon);
      String meaning = entry.substring(colon + 1);
      exitCodes.put(code, meaning);
      if (!meaning.startsWith("exec:")) {
        notExec.put(code, meaning);
      }
    }
    document(commandLine, exitCodes, notExec);
    return commandLine;
  }

  /**
   * Lists the exit codes in the help of {@code command} and every command under it: the whole table
   * for the top and {@code exec}, the rest without the codes only {@code exec} returns.
   */
  private static void document(
      CommandLine command, Map<String, String> exitCodes, Map<String, String> notExec) {
    boolean all = command.getParent() == null || command.getCommand() instanceof ExecCommand;
    command.getCommandSpec().usageMessage().exitCodeListHeading("%nExit codes:%n");
    command.getCommandSpec().usageMessage().exitCodeList(all ? exitCodes : notExec);
    for (CommandLine sub : command.getSubcommands().values()) {
      document(sub, exitCodes, notExec);
    }
  }
}
