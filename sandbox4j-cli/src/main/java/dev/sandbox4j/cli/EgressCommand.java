package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j egress ID [POLICY] [--header DOMAIN:NAME:VALUE]...}: shows or replaces a local
 * sandbox's egress policy while it runs.
 */
@Command(
    name = "egress",
    mixinStandardHelpOptions = true,
    description = {
      "Shows a local sandbox's egress policy, or replaces it (new connections follow it at once).",
      "POLICY is none, all (the public internet; the default of a new sandbox) or a"
          + " comma-separated allowlist of domains (api.example.com, *.example.com) and CIDRs"
          + " (198.51.100.0/24); domains are reached through the host's egress proxy."
    })
final class EgressCommand implements Callable<Integer> {
  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(index = "0", paramLabel = "ID", description = "A local sandbox ref or id.")
  String ref;

  @Parameters(
      index = "1",
      arity = "0..1",
      paramLabel = "POLICY",
      description = "none, all, or a comma-separated allowlist.")
  String policy;

  @Option(
      names = "--header",
      paramLabel = "DOMAIN:NAME:VALUE",
      description =
          "The proxy sets header NAME to VALUE on requests to DOMAIN (repeatable); the value"
              + " stays on the host. Plain HTTP only, unless TLS interception is on.")
  List<String> headers;

  @Override
  public Integer call() {
    WorkspaceRef parsed = StateCommands.localRefs(root, spec, List.of(ref)).getFirst();
    LocalSandbox sandboxes = root.providers().local();
    if (policy == null) {
      if (headers != null && !headers.isEmpty()) {
        throw new ParameterException(spec.commandLine(), "--header needs a POLICY too");
      }
      root.context().out().println(sandboxes.egress(parsed));
      return ExitCodes.OK;
    }
    sandboxes.setEgress(parsed, parse(spec, policy, headers));
    root.context().out().println(parsed);
    return ExitCodes.OK;
  }

  /** The policy a command line names; a usage error naming what is wrong. */
  static EgressPolicy parse(CommandSpec spec, String text, List<String> headers) {
    try {
      EgressPolicy p =
          switch (text.strip()) {
            case "none" -> EgressPolicy.none();
            case "all" -> EgressPolicy.all();
            default ->
                EgressPolicy.allow(
                    Arrays.stream(text.split(","))
                        .map(String::strip)
                        .filter(s -> !s.isEmpty())
                        .toList());
          };
      for (String h : headers == null ? List.<String>of() : headers) {
        String[] parts = h.split(":", 3);
        if (parts.length != 3) {
          throw new IllegalArgumentException(
              "--header must be DOMAIN:NAME:VALUE, e.g. api.example.com:Authorization:Bearer x");
        }
        p = p.withHeader(parts[0], parts[1], parts[2].strip());
      }
      return p;
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
  }
}
