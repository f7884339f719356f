package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j url ID PORT} and {@code sandbox4j forward ID PORT}: a sandbox's ports, through
 * {@link Machines} (a provider without port URLs refuses them).
 */
final class PortCommands {
  private PortCommands() {}

  /** What both take: one local sandbox and one of its ports. */
  abstract static class OnePort implements Callable<Integer> {
    @ParentCommand SandboxCommand root;
    @Spec CommandSpec spec;

    @Parameters(index = "0", paramLabel = "ID", description = "A local sandbox's ref or id.")
    String ref;

    @Parameters(
        index = "1",
        paramLabel = "PORT",
        description = "The port inside the sandbox, 1 to 65535.")
    int port;

    /**
     * A k8s sandbox's port is forwarded by this process (through the API server's port-forward),
     * not by the home's supervisor: the forward lives as long as the command, which therefore stays
     * in the foreground, like {@code kubectl port-forward}, until it is interrupted. Returns the
     * exit code, or -1 where the supervisor serves the port and the command returns.
     */
    int holdIfForwardedHere(WorkspaceRef r) {
      if (!r.provider().equals(dev.sandbox4j.kubernetes.KubernetesSandbox.NAME)) {
        return -1;
      }
      root.context().out().flush();
      root.context()
          .err()
          .println("forwarding through the Kubernetes API server until interrupted (Ctrl-C)");
      root.context().err().flush();
      try {
        Thread.sleep(Long.MAX_VALUE);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return ExitCodes.OK;
    }

    WorkspaceRef parsed() {
      if (port < 1 || port > 65535) {
        throw new picocli.CommandLine.ParameterException(
            spec.commandLine(), "PORT must be from 1 to 65535, was " + port);
      }
      WorkspaceRef parsed = StateCommands.machineRefs(root, spec, List.of(ref)).get(0);
      if (!root.machinesOf(parsed).servePorts()) {
        throw new picocli.CommandLine.ParameterException(
            spec.commandLine(),
            parsed + " is a " + parsed.provider() + " workspace: it has no port URLs");
      }
      return parsed;
    }
  }

  @Command(
      name = "url",
      mixinStandardHelpOptions = true,
      description = {
        "Prints the URL on this host that serves PORT of a sandbox (local or docker):"
            + " http://PORT-ID.localhost:PROXYPORT/ (HTTP/1.1, WebSocket, h2c upgrade).",
        "The home's supervisor serves it (this starts it); a request wakes a sleeping sandbox."
            + " Browsers resolve *.localhost to 127.0.0.1; other clients can connect to"
            + " 127.0.0.1:PROXYPORT and send the URL's host as Host. A sandbox created with"
            + " --port-token needs its token (header X-Sandbox4j-Token or query parameter"
            + " s4j_token): --token prints it, --with-token puts it into the URL."
      })
  static final class Url extends OnePort {
    @Option(
        names = "--with-token",
        description = "Print the URL with ?s4j_token=TOKEN when the sandbox has a token.")
    boolean withToken;

    @Option(names = "--token", description = "Print the sandbox's token on a second line, if any.")
    boolean token;

    @Option(
        names = "--json",
        description =
            "Print {\"provider\",\"id\",\"port\",\"url\",\"token\"} instead: url as the"
                + " line would be, token the sandbox's token with --token or --with-token (null"
                + " without, or if it has none).")
    boolean json;

    @Override
    public Integer call() {
      WorkspaceRef r = parsed();
      Machines machines = root.machinesOf(r);
      URI url = machines.url(r, port);
      Optional<String> secret =
          withToken || token ? machines.portToken(r) : Optional.<String>empty();
      String line = url.toString();
      if (withToken && secret.isPresent()) {
        line += "?s4j_token=" + URLEncoder.encode(secret.get(), StandardCharsets.UTF_8);
      }
      if (json) {
        Map<String, Object> fields = Json.ref(r);
        fields.put("port", port);
        fields.put("url", line);
        fields.put("token", secret.orElse(null));
        root.context().out().println(Json.write(fields));
        return ExitCodes.OK;
      }
      root.context().out().println(line);
      if (token && secret.isPresent()) {
        root.context().out().println(secret.get());
      }
      int held = holdIfForwardedHere(r);
      return held >= 0 ? held : ExitCodes.OK;
    }
  }

  @Command(
      name = "forward",
      mixinStandardHelpOptions = true,
      description = {
        "Forwards a port on 127.0.0.1 of this host to PORT of a sandbox (raw TCP) and prints"
            + " 127.0.0.1:HOSTPORT.",
        "The home's supervisor listens on it until the sandbox is destroyed; asking again prints"
            + " the same port. Any local process can connect to it (there is no token).",
        "A k8s sandbox's port goes through the Kubernetes API server's port-forward, served by"
            + " this command: it stays in the foreground until interrupted."
      })
  static final class Forward extends OnePort {
    @Option(
        names = "--json",
        description =
            "Print {\"provider\",\"id\",\"port\",\"host\":\"127.0.0.1\",\"hostPort\"}"
                + " instead.")
    boolean json;

    @Override
    public Integer call() {
      WorkspaceRef r = parsed();
      int hostPort = root.machinesOf(r).forwardTcp(r, port);
      if (json) {
        Map<String, Object> fields = Json.ref(r);
        fields.put("port", port);
        fields.put("host", "127.0.0.1");
        fields.put("hostPort", hostPort);
        root.context().out().println(Json.write(fields));
      } else {
        root.context().out().println("127.0.0.1:" + hostPort);
      }
      int held = holdIfForwardedHere(r);
      return held >= 0 ? held : ExitCodes.OK;
    }
  }
}
