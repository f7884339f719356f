package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.EgressRules;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j egress ID [POLICY] [--header DOMAIN[/PORTS]:NAME:VALUE]... [--intercept-tls]}:
 * shows or replaces a sandbox's egress policy while it runs, through {@link Machines} (a local
 * sandbox, or a remote one with a server).
 */
@Command(
    name = "egress",
    mixinStandardHelpOptions = true,
    description = {
      "Shows a sandbox's egress policy (local, docker, or remote with a server), or replaces it"
          + " (new connections follow it at once).",
      "POLICY is none, all (the public internet; the default of a new sandbox) or a"
          + " comma-separated allowlist of domains (api.example.com, *.example.com) and CIDRs"
          + " (198.51.100.0/24); domains are reached through the host's egress proxy. No policy"
          + " opens the host, loopback, link-local or other sandboxes (10.64.0.0/10): a CIDR"
          + " inside those is refused, a wider one (0.0.0.0/0) opens the rest."
    })
final class EgressCommand implements Callable<Integer> {
  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(
      index = "0",
      paramLabel = "ID",
      description = "A sandbox ref or id (local, or remote with a server).")
  String ref;

  @Parameters(
      index = "1",
      arity = "0..1",
      paramLabel = "POLICY",
      description = "none, all, or a comma-separated allowlist.")
  String policy;

  @Option(names = "--header", paramLabel = "DOMAIN[/PORTS]:NAME:VALUE", description = HEADER_HELP)
  List<String> headers;

  @Option(names = "--intercept-tls", description = INTERCEPT_HELP)
  boolean interceptTls;

  @Option(
      names = "--json",
      description =
          "Print the rules in force (after a change too) as the server's EgressRules:"
              + " {\"mode\":\"none|all|allowlist\",\"allow\",\"headers\":[{\"domain\",\"name\","
              + "\"ports\"}],\"interceptTls\"}; header values are never printed.")
  boolean json;

  static final String HEADER_HELP =
      "The egress proxy sets header NAME to VALUE on requests to DOMAIN (repeatable); the value"
          + " stays on the host. Without /PORTS only HTTPS to port 443 under --intercept-tls gets"
          + " it; with /PORTS (api.example.com/80,8080:X-Key:v) requests to exactly those ports"
          + " do, plain HTTP included.";

  static final String INTERCEPT_HELP =
      "The egress proxy terminates HTTPS with its own CA (installed into the sandbox) so that"
          + " header rules reach HTTPS requests.";

  @Override
  public Integer call() {
    WorkspaceRef parsed = StateCommands.machineRefs(root, spec, List.of(ref)).getFirst();
    Machines sandboxes = root.machinesOf(parsed);
    if (policy == null) {
      if ((headers != null && !headers.isEmpty()) || interceptTls) {
        throw new ParameterException(
            spec.commandLine(), "--header and --intercept-tls need a POLICY too");
      }
      EgressRules rules = sandboxes.egressRules(parsed);
      root.context().out().println(json ? Json.write(fields(rules)) : shown(rules));
      return ExitCodes.OK;
    }
    EgressPolicy p = parse(spec, policy, headers, interceptTls);
    warnNarrowed(root.context().err(), p);
    sandboxes.setEgressRules(parsed, p.toRules());
    root.context()
        .out()
        .println(json ? Json.write(fields(sandboxes.egressRules(parsed))) : parsed.toString());
    return ExitCodes.OK;
  }

  /**
   * The rules with the field names of the server's {@code EgressRules}, less each header's value: a
   * secret that stays on the host, which the text form hides too.
   */
  static Map<String, Object> fields(EgressRules rules) {
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("mode", rules.mode().name().toLowerCase(Locale.ROOT));
    fields.put("allow", rules.allow());
    List<Map<String, Object>> headers = new ArrayList<>();
    for (EgressRules.Header h : rules.headers()) {
      Map<String, Object> header = new LinkedHashMap<>();
      header.put("domain", h.domain());
      header.put("name", h.name());
      header.put("ports", h.ports());
      headers.add(header);
    }
    fields.put("headers", headers);
    fields.put("interceptTls", rules.interceptTls());
    return fields;
  }

  /**
   * The rules as the policy they state, whose text hides header values; as the bare rules (values
   * hidden too) where the policy refuses one: a sandbox may keep a rule stored before such rules
   * were refused, and showing it must not fail.
   */
  private static Object shown(EgressRules rules) {
    try {
      return EgressPolicy.of(rules);
    } catch (IllegalArgumentException refusedSince) {
      return rules;
    }
  }

  /** Says, on stderr, which ranges a wide CIDR rule does not open. */
  static void warnNarrowed(java.io.PrintStream err, EgressPolicy policy) {
    for (String line : policy.narrowings()) {
      err.println("note: " + line);
    }
  }

  /** The policy a command line names; a usage error naming what is wrong. */
  static EgressPolicy parse(
      CommandSpec spec, String text, List<String> headers, boolean interceptTls) {
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
              "--header must be DOMAIN[/PORTS]:NAME:VALUE, e.g. api.example.com:Authorization:Bearer"
                  + " x or api.example.com/80,8080:X-Key:v");
        }
        String domain = parts[0];
        List<Integer> ports = List.of();
        int slash = domain.indexOf('/');
        if (slash >= 0) {
          ports = ports(domain.substring(slash + 1));
          domain = domain.substring(0, slash);
        }
        p = p.withHeader(domain, parts[1], parts[2].strip(), ports);
      }
      return interceptTls ? p.withInterceptTls(true) : p;
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
  }

  private static List<Integer> ports(String list) {
    List<Integer> out = new java.util.ArrayList<>();
    for (String p : list.split(",", -1)) {
      if (!p.strip().matches("[0-9]{1,5}")) {
        throw new IllegalArgumentException(
            "--header ports must be a comma-separated list of port numbers, not '" + list + "'");
      }
      out.add(Integer.parseInt(p.strip()));
    }
    return out;
  }
}
