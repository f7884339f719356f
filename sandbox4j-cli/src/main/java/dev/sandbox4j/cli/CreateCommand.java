package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j create}: creates a sandbox (or workspace) and prints its ref. */
@Command(
    name = "create",
    mixinStandardHelpOptions = true,
    description = {
      "Creates a sandbox and prints its ref (provider:id) on stdout.",
      "The first local sandbox on a machine builds the default image first (about a minute;"
          + " progress on stderr)."
    })
final class CreateCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description =
          "Where to create it: local (isolated), remote (on the server of --server), docker (a"
              + " Docker daemon's containers) or host (not isolated). Default: remote with a"
              + " server, else local.")
  String provider;

  @Option(
      names = "--image",
      paramLabel = "IMAGE",
      description =
          "The image of the sandbox: a name (see 'sandbox4j image ls') or a registry reference"
              + " such as python:3.12-slim, pulled first if it is not here (see 'image pull')."
              + " Default: default.")
  String image;

  @Option(names = "--cpus", paramLabel = "N", description = "CPU quota: 1, 2, 4 or 8 (default: 1).")
  Integer cpus;

  @Option(
      names = "--memory",
      paramLabel = "SIZE",
      converter = ByteSizeConverter.class,
      description = "Memory limit, e.g. 512M or 2G (default: 4G per CPU; at least 64M).")
  Long memory;

  @Option(
      names = "--disk",
      paramLabel = "SIZE",
      converter = ByteSizeConverter.class,
      description =
          "Quota of the sandbox's writable layer, e.g. 2G (default: 10G; at least 64M): past it,"
              + " writes inside fail with 'No space left on device'.")
  Long disk;

  @Option(
      names = "--disk-inodes",
      paramLabel = "N",
      description =
          "How many files, directories and links the sandbox can create (default: 1000000).")
  Long diskInodes;

  @Option(
      names = "--snapshot",
      paramLabel = "NAME",
      description =
          "Start from this snapshot ('sandbox4j snapshot ls') with the size it was saved with:"
              + " not with --image, --cpus or --memory.")
  String snapshot;

  @Option(
      names = "--user",
      paramLabel = "USER",
      description =
          "Who the sandbox's commands and files run as: UID, NAME, UID:GID or NAME:GROUP (a name"
              + " from the image's /etc/passwd). Default: the image's User (root if it sets none),"
              + " or 'sandbox' for Sandbox4j's own images. Local and docker sandboxes.")
  String user;

  @Option(
      names = "--workdir",
      paramLabel = "PATH",
      description =
          "An absolute directory to create in the sandbox, owned by its user. Commands start in"
              + " the sandbox's own (/home/sandbox, or an imported or pulled image's WorkingDir)"
              + " unless each exec names it with --workdir too.")
  String workdir;

  @Option(
      names = {"-l", "--label"},
      paramLabel = "KEY=VALUE",
      description = "A label 'sandbox4j ls' shows (repeatable).")
  Map<String, String> labels;

  @Option(
      names = {"-e", "--env"},
      paramLabel = "KEY=VALUE",
      description =
          "A variable every command in the workspace gets (repeatable), for providers that keep"
              + " it: remote does (the server stores it); neither local nor host does between runs"
              + " of sandbox4j: pass --env to each 'sandbox4j exec' instead.")
  Map<String, String> env;

  @Option(
      names = "--auto-suspend",
      paramLabel = "DURATION",
      description =
          "Suspend the sandbox once it has been idle this long (no command running, no command or"
              + " file operation, under 0.1 CPU), e.g. 10m; any later use wakes it. Default: 0,"
              + " never.")
  String autoSuspend;

  @Option(
      names = "--lifetime",
      paramLabel = "DURATION",
      description =
          "Destroy the sandbox this long after its creation, from 10s to 24h. Default: 24h.")
  String lifetime;

  @Option(
      names = "--idle-timeout",
      paramLabel = "DURATION",
      description =
          "Destroy the sandbox once it has been idle this long (as for --auto-suspend; a"
              + " suspended or stopped sandbox is idle). Default: 0, never.")
  String idleTimeout;

  @Option(
      names = "--delete-after",
      paramLabel = "INSTANT|DURATION",
      description =
          "Destroy the sandbox at this time (ISO-8601 such as 2026-01-31T18:00:00Z) or this long"
              + " from now (e.g. 2h).")
  String deleteAfter;

  @Option(
      names = "--egress",
      paramLabel = "POLICY",
      description =
          "Where it may connect: none, all (the public internet, nothing private: the default) or"
              + " a comma-separated allowlist of domains (*.example.com) and CIDRs; see"
              + " 'sandbox4j egress'.")
  String egress;

  @Option(
      names = "--header",
      paramLabel = "DOMAIN[/PORTS]:NAME:VALUE",
      description = EgressCommand.HEADER_HELP)
  List<String> headers;

  @Option(names = "--intercept-tls", description = EgressCommand.INTERCEPT_HELP)
  boolean interceptTls;

  @Option(
      names = "--network",
      paramLabel = "NAME",
      description =
          "Put it on this named network (repeatable): its members reach each other by id."
              + " Default: none (isolated).")
  List<String> networks;

  @Mixin IsolationOption isolation;

  @Option(
      names = "--port-token",
      description =
          "Require a token for the sandbox's port URLs ('sandbox4j url ID PORT --token' prints"
              + " it). Default: none, any local process can open them.")
  boolean portToken;

  @Option(
      names = "--json",
      description =
          "Print {\"provider\":...,\"id\":...,\"workingDirectory\":...} instead, and no"
              + " progress.")
  boolean json;

  /** The timer flags, or null if none was given. */
  private Providers.Timers timers() {
    if (autoSuspend == null && lifetime == null && idleTimeout == null && deleteAfter == null) {
      return null;
    }
    return new Providers.Timers(
        duration("--auto-suspend", autoSuspend, true),
        duration("--lifetime", lifetime, false),
        duration("--idle-timeout", idleTimeout, true),
        deleteAfter == null ? null : pointInTime(deleteAfter));
  }

  private Duration duration(String option, String text, boolean zeroMeansNever) {
    if (text == null) {
      return null;
    }
    if (zeroMeansNever && (text.strip().equals("0") || text.strip().equals("never"))) {
      return Duration.ZERO;
    }
    try {
      return new DurationConverter().convert(text);
    } catch (CommandLine.TypeConversionException e) {
      throw new ParameterException(spec.commandLine(), option + ": " + e.getMessage());
    }
  }

  private Instant pointInTime(String text) {
    try {
      return Instant.parse(text.strip());
    } catch (DateTimeParseException notAnInstant) {
      try {
        return Instant.now().plus(new DurationConverter().convert(text));
      } catch (CommandLine.TypeConversionException e) {
        throw new ParameterException(
            spec.commandLine(),
            "--delete-after: '"
                + text
                + "' is neither a time (2026-01-31T18:00:00Z) nor a duration (2h, 30m)");
      }
    }
  }

  @Override
  public Integer call() {
    provider = root.providerOrDefault(provider);
    root.provider(spec, provider); // an unknown provider is the error to report first
    if (snapshot != null) {
      List<String> conflicting = new ArrayList<>();
      if (image != null) {
        conflicting.add("--image");
      }
      if (cpus != null) {
        conflicting.add("--cpus");
      }
      if (memory != null) {
        conflicting.add("--memory");
      }
      if (!conflicting.isEmpty()) {
        throw new ParameterException(
            spec.commandLine(),
            "--snapshot cannot be combined with "
                + String.join(", ", conflicting)
                + ": a sandbox from a snapshot keeps the image and size it was saved with");
      }
    }
    if (env != null && !env.isEmpty() && !root.providers().keepsEnv(provider)) {
      throw new ParameterException(
          spec.commandLine(),
          provider
              + " workspaces do not keep an environment between commands: pass --env to each"
              + " 'sandbox4j exec' instead");
    }
    EgressPolicy policy =
        egress != null || (headers != null && !headers.isEmpty()) || interceptTls
            ? EgressCommand.parse(spec, egress == null ? "all" : egress, headers, interceptTls)
            : null;
    if (policy != null) {
      EgressCommand.warnNarrowed(root.context().err(), policy);
    }
    WorkspaceProvider workspaces =
        root.provider(
            spec,
            provider,
            new Providers.Settings(
                env,
                workdir,
                image,
                cpus,
                memory,
                labels,
                snapshot,
                timers(),
                policy,
                networks,
                portToken,
                disk,
                diskInodes,
                isolation.isolation,
                user));
    root.warnIfNotIsolated(provider);
    Workspace workspace = Workspace.of(workspaces.newBackend());
    WorkspaceRef ref;
    try (var task = root.task(root.creating(provider), false, json)) {
      ref = workspace.open();
    }
    if (json) {
      Map<String, String> fields = new LinkedHashMap<>();
      fields.put("provider", ref.provider());
      fields.put("id", ref.id());
      fields.put("workingDirectory", workspace.workingDirectory());
      root.context().out().println(Json.write(fields));
    } else {
      root.context().out().println(ref);
    }
    return ExitCodes.OK;
  }
}
