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

  /**
   * The subcommands of {@code sandbox4j}, in the order its help lists them. Not in {@link
   * SandboxCommand}'s annotation: picocli would build every one of them, reflecting over their
   * options, for every command line, which costs a served command in the resident process more than
   * its own work (see {@link #commandLine(CliContext, String...)}).
   */
  static final java.util.List<Class<?>> SUBCOMMANDS =
      java.util.List.of(
          SetupCommand.class,
          DoctorCommand.class,
          ImageCommand.class,
          CreateCommand.class,
          ExecCommand.class,
          ShellCommand.class,
          CopyCommand.class,
          ListCommand.class,
          RemoveCommand.class,
          StateCommands.Suspend.class,
          StateCommands.Resume.class,
          StateCommands.Stop.class,
          StateCommands.Start.class,
          StateCommands.Hibernate.class,
          ForkCommand.class,
          EgressCommand.class,
          SnapshotCommand.class,
          GcCommand.class,
          PortCommands.Url.class,
          PortCommands.Forward.class,
          RunCommand.class,
          McpCommand.class,
          ServeCommand.class,
          KeysCommand.class,
          DemoCommand.class,
          CompletionCommand.class);

  /** Each subcommand's class by the names it answers to (its name and aliases). */
  private static final Map<String, Class<?>> BY_NAME = byName();

  private Cli() {}

  /** Runs the CLI with {@code args} and returns its exit code; never throws, never exits. */
  static int run(CliContext context, String... args) {
    CommandLine commandLine = commandLine(context, args);
    try {
      return commandLine.execute(args);
    } finally {
      commandLine.getOut().flush();
      commandLine.getErr().flush();
      context.out().flush();
      context.err().flush();
    }
  }

  /** The whole command line, every subcommand in it. */
  static CommandLine commandLine(CliContext context) {
    return build(context, SUBCOMMANDS);
  }

  /**
   * The command line that runs {@code args}: with only the subcommand they name when they name one,
   * which is all picocli looks at to run it; with none for the top's {@code --version}; with every
   * subcommand otherwise (the top's help, a mistyped name, which picocli answers with the names it
   * knows). The subcommand is the first argument that is not an option of the top command (or the
   * value of one).
   */
  static CommandLine commandLine(CliContext context, String... args) {
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--server")) {
        i++; // its value
      } else if (!a.startsWith("-") || a.equals("-")) {
        Class<?> named = BY_NAME.get(a);
        boolean alone = named != null && named != CompletionCommand.class; // that one lists all
        return build(context, alone ? java.util.List.of(named) : SUBCOMMANDS);
      }
    }
    java.util.List<String> options = java.util.List.of(args);
    boolean versionOnly =
        (options.contains("--version") || options.contains("-V"))
            && !options.contains("--help")
            && !options.contains("-h");
    return build(context, versionOnly ? java.util.List.of() : SUBCOMMANDS);
  }

  private static Map<String, Class<?>> byName() {
    Map<String, Class<?>> names = new java.util.HashMap<>();
    for (Class<?> c : SUBCOMMANDS) {
      CommandLine.Command command = c.getAnnotation(CommandLine.Command.class);
      names.put(command.name(), c);
      for (String alias : command.aliases()) {
        names.put(alias, c);
      }
    }
    return Map.copyOf(names);
  }

  private static CommandLine build(CliContext context, java.util.List<Class<?>> subcommands) {
    SandboxCommand root = new SandboxCommand(context);
    FailureHandler failures = new FailureHandler(context.err(), root::debug);
    CommandLine commandLine = new CommandLine(root);
    // before the settings below: picocli applies them to the subcommands there are
    for (Class<?> subcommand : subcommands) {
      commandLine.addSubcommand(subcommand);
    }
    commandLine
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
