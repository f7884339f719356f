package dev.sandbox4j.cli;

import dev.sandbox4j.server.ServerKeys;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code sandbox4j keys}: the API keys of {@code sandbox4j serve}. */
@Command(
    name = "keys",
    mixinStandardHelpOptions = true,
    description = {
      "Creates, lists and revokes the API keys of 'sandbox4j serve'. A key belongs to one"
          + " organization and sees only its sandboxes. Works while the server runs; a revoked key"
          + " is refused from the next request on."
    },
    subcommands = {KeysCommand.Create.class, KeysCommand.List.class, KeysCommand.Revoke.class})
final class KeysCommand implements Runnable {

  @ParentCommand SandboxCommand root;

  @Option(
      names = "--data",
      paramLabel = "DIR",
      scope = picocli.CommandLine.ScopeType.INHERIT,
      description = "The server's database directory. Default: $SANDBOX4J_HOME/server.")
  Path data;

  @Override
  public void run() {
    throw new picocli.CommandLine.ParameterException(
        new picocli.CommandLine(this), "name a subcommand: create, ls or revoke");
  }

  static Path dataDirectory(SandboxCommand root) {
    return root.context().home().resolve("server");
  }

  ServerKeys open() {
    return ServerKeys.open(data != null ? data : dataDirectory(root));
  }

  /** {@code keys create --org NAME}. */
  @Command(
      name = "create",
      mixinStandardHelpOptions = true,
      description = {
        "Creates a key for an organization (created if new) and prints it on stdout, once: only"
            + " its hash is stored."
      })
  static final class Create implements Callable<Integer> {
    @ParentCommand KeysCommand keys;

    @Option(
        names = "--org",
        required = true,
        paramLabel = "NAME",
        description = "The organization: 1 to 63 of a-z, 0-9, '.', '_', '-'.")
    String organization;

    @Option(
        names = "--json",
        description =
            "Print {\"id\",\"organization\",\"prefix\",\"key\"} instead of the key alone, and"
                + " nothing on stderr.")
    boolean json;

    @Override
    public Integer call() {
      try (ServerKeys store = keys.open()) {
        ServerKeys.CreatedKey created = store.create(organization);
        if (json) {
          Map<String, Object> fields = new LinkedHashMap<>();
          fields.put("id", created.id());
          fields.put("organization", created.organization());
          fields.put("prefix", created.prefix());
          fields.put("key", created.key());
          keys.root.context().out().println(Json.write(fields));
          return ExitCodes.OK;
        }
        keys.root.context().out().println(created.key());
        keys.root
            .context()
            .err()
            .println(
                "sandbox4j: key "
                    + created.id()
                    + " for organization "
                    + created.organization()
                    + ": it is shown only now");
      } catch (IllegalArgumentException e) {
        keys.root.context().err().println("sandbox4j: " + e.getMessage());
        return ExitCodes.USAGE;
      }
      return ExitCodes.OK;
    }
  }

  /** {@code keys ls}. */
  @Command(
      name = "ls",
      mixinStandardHelpOptions = true,
      description = "Lists the keys: id, organization, prefix, created, revoked.")
  static final class List implements Callable<Integer> {
    @ParentCommand KeysCommand keys;

    @Option(
        names = "--json",
        description =
            "Print a JSON array of {\"id\",\"organization\",\"prefix\",\"created\","
                + "\"revoked\"} instead; revoked is null for a key in use.")
    boolean json;

    @Override
    public Integer call() {
      PrintStream out = keys.root.context().out();
      try (ServerKeys store = keys.open()) {
        if (json) {
          java.util.List<Map<String, Object>> rows = new ArrayList<>();
          for (ServerKeys.KeyInfo k : store.list()) {
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("id", k.id());
            fields.put("organization", k.organization());
            fields.put("prefix", k.prefix());
            fields.put("created", String.valueOf(k.created()));
            fields.put("revoked", k.revoked() == null ? null : String.valueOf(k.revoked()));
            rows.add(fields);
          }
          out.println(Json.write(rows));
          return ExitCodes.OK;
        }
        out.printf("%-12s  %-20s  %-10s  %-24s  %s%n", "ID", "ORG", "PREFIX", "CREATED", "REVOKED");
        for (ServerKeys.KeyInfo k : store.list()) {
          out.printf(
              "%-12s  %-20s  %-10s  %-24s  %s%n",
              k.id(),
              k.organization(),
              k.prefix(),
              k.created(),
              k.revoked() == null ? "-" : k.revoked());
        }
      }
      return ExitCodes.OK;
    }
  }

  /** {@code keys revoke ID}. */
  @Command(
      name = "revoke",
      mixinStandardHelpOptions = true,
      description = "Revokes a key by its id or its prefix (see 'keys ls').")
  static final class Revoke implements Callable<Integer> {
    @ParentCommand KeysCommand keys;

    @Parameters(paramLabel = "ID", description = "The key's id, or its prefix (s4j_...).")
    String id;

    @Override
    public Integer call() {
      try (ServerKeys store = keys.open()) {
        if (!store.revoke(id)) {
          keys.root.context().err().println("sandbox4j: no unrevoked key " + id);
          return ExitCodes.USAGE;
        }
      } catch (IllegalArgumentException e) {
        keys.root.context().err().println("sandbox4j: " + e.getMessage());
        return ExitCodes.USAGE;
      }
      keys.root.context().err().println("sandbox4j: revoked key " + id);
      return ExitCodes.OK;
    }
  }
}
