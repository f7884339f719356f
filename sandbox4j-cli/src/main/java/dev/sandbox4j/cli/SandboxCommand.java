package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.Properties;
import picocli.CommandLine.Command;
import picocli.CommandLine.IVersionProvider;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine.Spec;

/**
 * The top-level {@code sandbox4j} command: holds the options every subcommand shares and the
 * helpers they use to turn user input into providers and refs.
 */
@Command(
    name = "sandbox4j",
    mixinStandardHelpOptions = true,
    versionProvider = SandboxCommand.Version.class,
    description = {
      "Isolated shells and filesystems for AI agents: create workspaces and run commands in them.",
      "",
      "Today the only provider is 'host': a workspace is a plain directory under"
          + " $SANDBOX4J_HOME/host (default ~/.sandbox4j/host) and isolates nothing."
    },
    subcommands = {CreateCommand.class, ExecCommand.class, ListCommand.class, RemoveCommand.class})
final class SandboxCommand implements Runnable {

  /** The word that stands for a fresh workspace where a ref is expected. */
  static final String NEW = "new";

  private final CliContext context;
  private final Providers providers;
  private boolean quiet;
  private boolean debug;

  @Spec CommandSpec spec;

  SandboxCommand(CliContext context) {
    this.context = context;
    this.providers = new Providers(context.home());
  }

  @Option(
      names = "--quiet",
      scope = ScopeType.INHERIT,
      description = "Do not warn that host workspaces are not isolated.")
  void setQuiet(boolean quiet) {
    this.quiet = quiet;
  }

  @Option(
      names = "--debug",
      scope = ScopeType.INHERIT,
      description = "Print the stack trace of an error.")
  void setDebug(boolean debug) {
    this.debug = debug;
  }

  boolean debug() {
    return debug;
  }

  CliContext context() {
    return context;
  }

  Providers providers() {
    return providers;
  }

  @Override
  public void run() {
    throw new ParameterException(spec.commandLine(), "missing a command: create, exec, ls or rm");
  }

  /** Parses a {@code provider:id} ref of a known provider; a usage error otherwise. */
  WorkspaceRef parseRef(CommandSpec command, String text) {
    if (NEW.equals(text)) {
      throw new ParameterException(
          command.commandLine(), "'" + NEW + "' is not a workspace ref here: expected provider:id");
    }
    WorkspaceRef ref;
    try {
      ref = WorkspaceRef.parse(text);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(command.commandLine(), e.getMessage(), e);
    }
    if (!providers.names().contains(ref.provider())) {
      throw new ParameterException(
          command.commandLine(),
          "unknown workspace provider '"
              + ref.provider()
              + "' in '"
              + text
              + "' (known: "
              + String.join(", ", providers.names())
              + ")");
    }
    return ref;
  }

  /** The provider called {@code name}; a usage error if there is none. */
  WorkspaceProvider provider(CommandSpec command, String name, Map<String, String> env) {
    try {
      return providers.open(name, env);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(command.commandLine(), e.getMessage(), e);
    }
  }

  /** One line on stderr, once per command, unless {@code --quiet}. */
  void warnIfNotIsolated(String provider) {
    if (!quiet && !providers.isolates(provider)) {
      context
          .err()
          .println(
              "sandbox4j: warning: "
                  + provider
                  + " workspaces are not isolated: commands run on this machine as you");
    }
  }

  /** {@code sandbox4j <version>}, from the version Maven filtered into the jar. */
  static final class Version implements IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {"sandbox4j " + version()};
    }

    static String version() {
      try (InputStream in = Version.class.getResourceAsStream("version.properties")) {
        if (in == null) {
          return "unknown";
        }
        Properties p = new Properties();
        p.load(in);
        return p.getProperty("version", "unknown");
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
