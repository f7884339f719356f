package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j ls}: the existing sandboxes and workspaces. */
@Command(
    name = "ls",
    mixinStandardHelpOptions = true,
    description = {
      "Lists sandboxes and workspaces, sorted by provider and id: a table with a heading, or"
          + " nothing if there are none.",
      "Local sandboxes show their state (running, suspended, stopped, hibernated; creating or"
          + " destroying while that happens), image, creation time (UTC), when a timer destroys"
          + " them at the latest (ENDS: the end of their lifetime or their --delete-after time) and"
          + " labels, and the URL serving their ports (URL, {port} standing for the port: see"
          + " 'sandbox4j url'); host workspaces have none of these ('-')."
    })
final class ListCommand implements Callable<Integer> {

  private static final List<String> COLUMNS =
      List.of("state", "image", "created", "ends", "labels", "egress", "networks", "portUrl");

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description = "Only this provider's workspaces (default: every provider's).")
  String provider;

  @Option(
      names = "--json",
      description =
          "Print a JSON array instead: objects with provider and id, and for local sandboxes"
              + " state, image, created, labels, cpus, memoryBytes, pids, egress, networks, and"
              + " timers"
              + " (autoSuspendSeconds, sandboxTimeoutSeconds, idleTimeoutSeconds, deleteAfter)"
              + " with ends, portUrl, and diskBytes and diskInodes (the quota of its writable"
              + " layer; 0 for a sandbox made before sandboxes had disks, which has none).")
  boolean json;

  @Override
  public Integer call() {
    List<String> names = provider == null ? root.providers().names() : List.of(provider);
    List<Map<String, Object>> rows = new ArrayList<>();
    for (String name : names) {
      var workspaces = root.provider(spec, name);
      if (provider == null && !root.providers().mayHoldWorkspaces(name)) {
        continue;
      }
      try {
        rows.addAll(root.providers().list(workspaces));
      } catch (WorkspaceException e) {
        if (provider != null) {
          throw e;
        }
        root.context()
            .err()
            .println("sandbox4j: warning: cannot list " + name + " workspaces: " + e.getMessage());
      }
    }
    rows.sort(
        (a, b) ->
            (a.get("provider") + ":" + a.get("id"))
                .compareTo(b.get("provider") + ":" + b.get("id")));
    PrintStream out = root.context().out();
    if (json) {
      out.println(Json.write(rows));
    } else if (!rows.isEmpty()) {
      printTable(out, rows);
    }
    return ExitCodes.OK;
  }

  private static void printTable(PrintStream out, List<Map<String, Object>> rows) {
    List<List<String>> table = new ArrayList<>();
    List<String> heading = new ArrayList<>(List.of("REF"));
    COLUMNS.forEach(
        c -> heading.add(c.equals("portUrl") ? "URL" : c.toUpperCase(java.util.Locale.ROOT)));
    table.add(heading);
    for (Map<String, Object> row : rows) {
      List<String> cells = new ArrayList<>(List.of(row.get("provider") + ":" + row.get("id")));
      for (String column : COLUMNS) {
        cells.add(cell(row.get(column)));
      }
      table.add(cells);
    }
    int[] widths = new int[heading.size()];
    for (List<String> cells : table) {
      for (int i = 0; i < cells.size(); i++) {
        widths[i] = Math.max(widths[i], cells.get(i).length());
      }
    }
    for (List<String> cells : table) {
      StringBuilder line = new StringBuilder();
      for (int i = 0; i < cells.size(); i++) {
        line.append(cells.get(i));
        if (i < cells.size() - 1) {
          line.append(" ".repeat(widths[i] - cells.get(i).length() + 2));
        }
      }
      out.println(line.toString().stripTrailing());
    }
  }

  private static String cell(Object value) {
    if (value instanceof List<?> list) {
      return list.isEmpty()
          ? "-"
          : list.stream().map(String::valueOf).collect(Collectors.joining(","));
    }
    if (value instanceof Map<?, ?> labels) {
      return labels.isEmpty()
          ? "-"
          : labels.entrySet().stream()
              .map(e -> e.getKey() + "=" + e.getValue())
              .collect(Collectors.joining(","));
    }
    return value == null ? "-" : value.toString();
  }
}
