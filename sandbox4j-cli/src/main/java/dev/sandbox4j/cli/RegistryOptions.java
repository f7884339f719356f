package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.LocalSandbox;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * The options of a command that talks to registries ({@code image pull}, {@code image push}, {@code
 * snapshot push}): credentials per registry, the password from stdin, plain HTTP.
 */
final class RegistryOptions {
  @Spec(Spec.Target.MIXEE)
  CommandSpec command;

  @Option(
      names = "--registry-auth",
      paramLabel = "HOST=USER[:PASSWORD]",
      description =
          "Credentials for registry HOST (as in the reference: docker.io, ghcr.io,"
              + " localhost:5000). Without :PASSWORD, --password-stdin gives it.")
  List<String> registryAuth = List.of();

  @Option(
      names = "--password-stdin",
      description = "Read the password of --registry-auth's one registry from stdin.")
  boolean passwordStdin;

  @Option(
      names = "--plain-http",
      paramLabel = "HOST[:PORT]",
      description = "Speak plain HTTP to this registry (a trusted network only).")
  List<String> plainHttp = List.of();

  /**
   * The local engine of {@code root} with these credentials and plain-HTTP registries; reads the
   * password from stdin for {@code --password-stdin}.
   *
   * @throws ParameterException if the options do not fit together
   */
  LocalSandbox sandboxes(SandboxCommand root) throws IOException {
    Map<String, String[]> auth = new LinkedHashMap<>();
    for (String given : registryAuth) {
      int eq = given.indexOf('=');
      if (eq <= 0 || eq == given.length() - 1) {
        throw usage("--registry-auth takes HOST=USER[:PASSWORD], not '" + given + "'");
      }
      String host = given.substring(0, eq);
      String userPassword = given.substring(eq + 1);
      int colon = userPassword.indexOf(':');
      if (colon == 0) {
        throw usage("--registry-auth for " + host + " names no user");
      }
      auth.put(
          host,
          colon < 0
              ? new String[] {userPassword, null}
              : new String[] {userPassword.substring(0, colon), userPassword.substring(colon + 1)});
    }
    List<String[]> withoutPassword = auth.values().stream().filter(a -> a[1] == null).toList();
    if (passwordStdin) {
      if (withoutPassword.size() != 1) {
        throw usage(
            "--password-stdin needs exactly one --registry-auth HOST=USER without a password");
      }
      withoutPassword.getFirst()[1] =
          new String(root.context().in().readAllBytes(), StandardCharsets.UTF_8).strip();
    } else if (!withoutPassword.isEmpty()) {
      throw usage("--registry-auth HOST=USER without :PASSWORD needs --password-stdin");
    }
    return root.providers()
        .local(
            b -> {
              auth.forEach((host, up) -> b.registryAuth(host, up[0], up[1]));
              plainHttp.forEach(b::plainHttpRegistry);
            });
  }

  private ParameterException usage(String message) {
    return new ParameterException(command.commandLine(), message);
  }
}
