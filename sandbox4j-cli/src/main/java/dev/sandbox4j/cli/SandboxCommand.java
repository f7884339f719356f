package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;
import java.util.regex.Pattern;
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
      "Isolated shells and filesystems for AI agents: create sandboxes and run commands in them.",
      "",
      "The default provider, 'local', runs each sandbox as an isolated Linux container on this"
          + " machine (crun, overlayfs, namespaces, cgroups, seccomp); it needs root and a"
          + " prepared host: run 'sandbox4j setup' once. Its state lives in $SANDBOX4J_HOME"
          + " (default /var/lib/sandbox4j as root, ~/.sandbox4j otherwise).",
      "'--provider host' makes a workspace a plain directory under $SANDBOX4J_HOME/host instead:"
          + " it isolates nothing.",
      "",
      "With --server URL or $SANDBOX4J_URL set, the sandbox commands (create, ls, exec, cp,"
          + " shell, rm, suspend, resume, stop, start, hibernate, fork, snapshot, run, demo) act on"
          + " that sandbox4j server's sandboxes (provider 'remote') instead of this machine's,"
          + " with the API key in $SANDBOX4J_API_KEY.",
      "",
      "Where an ID is expected, 'local:ID' (or 'remote:ID' with a server), 'host:ID' and a bare"
          + " ID of the default provider all work."
    })
final class SandboxCommand implements Runnable {

  /** The word that stands for a fresh workspace where a ref is expected. */
  static final String NEW = "new";

  /** What a bare id (a local or remote sandbox's) may look like. */
  private static final Pattern BARE_ID = Pattern.compile("[a-z0-9]{1,32}");

  /** The variable naming the server, as {@code --server} does. */
  static final String SERVER_VARIABLE = "SANDBOX4J_URL";

  private final CliContext context;
  private Providers providers;
  private String server;
  private boolean quiet;
  private boolean noProgress;
  private boolean debug;
  private Progress progress;

  @Spec CommandSpec spec;

  SandboxCommand(CliContext context) {
    this.context = context;
  }

  @Option(
      names = "--server",
      paramLabel = "URL",
      scope = ScopeType.INHERIT,
      description =
          "Act on this sandbox4j server's sandboxes (e.g. http://127.0.0.1:7070), with the API key"
              + " in $SANDBOX4J_API_KEY. Default: $SANDBOX4J_URL; without either, this machine's.")
  void setServer(String server) {
    this.server = server;
  }

  @Option(
      names = "--quiet",
      scope = ScopeType.INHERIT,
      description =
          "Show no progress of long work (image builds, fork, snapshot, hibernate), and do not"
              + " warn that host workspaces are not isolated. Results and errors still print.")
  void setQuiet(boolean quiet) {
    this.quiet = quiet;
  }

  @Option(
      names = "--no-progress",
      scope = ScopeType.INHERIT,
      description =
          "Show progress as plain lines, one per step, even on a terminal (as when stderr is not"
              + " a terminal, $TERM is dumb or $CI is set) instead of one line redrawn in place.")
  void setNoProgress(boolean noProgress) {
    this.noProgress = noProgress;
  }

  @Option(
      names = "--debug",
      scope = ScopeType.INHERIT,
      description = "Print the stack trace of an error, and the engine's log.")
  void setDebug(boolean debug) {
    this.debug = debug;
    if (debug) {
      Cli.ENGINE_LOG.setLevel(java.util.logging.Level.INFO);
    }
  }

  boolean debug() {
    return debug;
  }

  CliContext context() {
    return context;
  }

  /** The providers, with the server of {@code --server} or {@code $SANDBOX4J_URL} if any. */
  Providers providers() {
    if (providers == null) {
      String url = server != null ? server : context.env().get(SERVER_VARIABLE);
      providers =
          new Providers(
              context.home(),
              line -> progress().step(line),
              url == null || url.isBlank() ? null : new Providers.Server(url, context.env()),
              context.env());
    }
    return providers;
  }

  /** Where the machine commands act: a server's sandboxes, or this machine's. */
  Machines machines() {
    return providers().machines();
  }

  /** The providers whose sandboxes the machine commands reach through that provider itself. */
  private static final java.util.Set<String> OWN_MACHINES =
      java.util.Set.of(
          dev.sandbox4j.docker.DockerSandbox.NAME,
          dev.sandbox4j.modal.ModalSandbox.NAME,
          dev.sandbox4j.boxd.BoxdSandbox.NAME,
          dev.sandbox4j.kubernetes.KubernetesSandbox.NAME);

  /**
   * Where the machine commands act on {@code ref}: a docker, modal, boxd or k8s sandbox's own
   * provider (what it cannot do, it says by name), else {@link #machines()} (the local engine, or
   * the server).
   */
  Machines machinesOf(WorkspaceRef ref) {
    return OWN_MACHINES.contains(ref.provider())
        ? new Machines(providers(), ref.provider())
        : machines();
  }

  /** {@code --provider}'s value, or the default: {@code remote} with a server, else local. */
  String providerOrDefault(String provider) {
    return provider != null ? provider : providers().defaultName();
  }

  /** The progress printer of this run, in the mode its options and stderr call for. */
  Progress progress() {
    if (progress == null) {
      progress =
          new Progress(
              context.err(),
              Progress.mode(quiet, noProgress, context.terminal(), context.env()),
              Progress.width(context.env()),
              System::nanoTime,
              true);
    }
    return progress;
  }

  /**
   * Starts long work on the progress line; close it when the work ends.
   *
   * @param title what is being done
   * @param known whether it is known to take a while, so that plain output names it at once
   * @param silent show nothing of it ({@code --json})
   */
  Progress.Task task(String title, boolean known, boolean silent) {
    return progress().start(title, known, silent);
  }

  /**
   * The progress title of a new workspace: {@code creating a local sandbox}, or a host workspace.
   */
  String creating(String provider) {
    return "creating a " + provider + (providers().isolates(provider) ? " sandbox" : " workspace");
  }

  @Override
  public void run() {
    throw new ParameterException(
        spec.commandLine(),
        "missing a command: setup, doctor, image, create, exec, shell, cp, ls, rm, suspend,"
            + " resume, stop, start, hibernate, fork, snapshot, gc, run, mcp or demo");
  }

  /**
   * Parses a ref of a known provider, {@code provider:id}, or a bare id, which means a sandbox of
   * the default provider (local, or remote with a server); a usage error otherwise.
   */
  WorkspaceRef parseRef(CommandSpec command, String text) {
    if (NEW.equals(text)) {
      throw new ParameterException(
          command.commandLine(),
          "'" + NEW + "' is not a workspace ref here: expected provider:id or a local sandbox id");
    }
    if (text != null && text.indexOf(':') < 0) {
      if (BARE_ID.matcher(text).matches()) {
        return new WorkspaceRef(providers().defaultName(), text);
      }
      throw new ParameterException(
          command.commandLine(),
          "malformed workspace ref '"
              + text
              + "': expected provider:id (e.g. local:k3x9ab01cd2e) or a bare "
              + providers().defaultName()
              + " sandbox id");
    }
    WorkspaceRef ref;
    try {
      ref = WorkspaceRef.parse(text);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(command.commandLine(), e.getMessage(), e);
    }
    if (!providers().names().contains(ref.provider())) {
      throw new ParameterException(
          command.commandLine(),
          "unknown workspace provider '"
              + ref.provider()
              + "' in '"
              + text
              + "' (known: "
              + String.join(", ", providers().names())
              + (ref.provider().equals(dev.sandbox4j.remote.RemoteSandbox.NAME)
                  ? "; remote sandboxes need --server URL or $" + SERVER_VARIABLE
                  : "")
              + ")");
    }
    return ref;
  }

  /** The provider called {@code name}; a usage error if there is none or a setting is wrong. */
  WorkspaceProvider provider(CommandSpec command, String name, Providers.Settings settings) {
    try {
      return providers().open(name, settings);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(command.commandLine(), e.getMessage(), e);
    }
  }

  /** The provider called {@code name} with default settings; a usage error if there is none. */
  WorkspaceProvider provider(CommandSpec command, String name) {
    return provider(command, name, Providers.Settings.DEFAULTS);
  }

  /** The backend of {@code ref}'s workspace (no I/O); a usage error if its id is malformed. */
  WorkspaceBackend backend(CommandSpec command, WorkspaceProvider provider, WorkspaceRef ref) {
    try {
      WorkspaceBackend checked =
          provider
              .backend(ref)
              .orElseThrow(() -> new IllegalStateException(ref + " is not a " + provider.name()));
      WorkspaceProvider onItsNetworks = providers.forRef(provider, ref);
      return onItsNetworks != provider ? onItsNetworks.backend(ref).orElseThrow() : checked;
    } catch (IllegalArgumentException e) {
      throw new ParameterException(command.commandLine(), e.getMessage(), e);
    }
  }

  /** One line on stderr, once per command, unless {@code --quiet}. */
  void warnIfNotIsolated(String provider) {
    if (!quiet && !providers().isolates(provider)) {
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
