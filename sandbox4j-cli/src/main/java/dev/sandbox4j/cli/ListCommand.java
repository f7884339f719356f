package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import dev.sandbox4j.workspace.machine.SupportsListing;
import java.io.PrintStream;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
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
          + " destroying while that happens), image, isolation (container or gvisor), creation"
          + " time (UTC), when a timer destroys"
          + " them at the latest (ENDS: the end of their lifetime or their --delete-after time) and"
          + " labels, and the URL serving their ports (URL, {port} standing for the port: see"
          + " 'sandbox4j url'); host workspaces have none of these ('-')."
    })
final class ListCommand implements Callable<Integer> {

  private static final List<String> COLUMNS =
      List.of(
          "state",
          "image",
          "isolation",
          "created",
          "ends",
          "labels",
          "egress",
          "networks",
          "portUrl");

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
              + " state, image, isolation, created, labels, cpus, memoryBytes, pids, egress,"
              + " networks, and"
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
      // before the provider is built: a cloud provider without credentials cannot be
      if (provider == null && !root.providers().mayHoldWorkspaces(name)) {
        continue;
      }
      var workspaces = root.provider(spec, name);
      try {
        rows.addAll(rowsOf(workspaces));
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

  /**
   * The workspaces {@code provider} holds, as {@code ls} shows them: {@code provider} and {@code
   * id}, then, for a provider that lists its machines ({@link SupportsListing}), {@code state},
   * {@code image}, {@code isolation} (where the provider says it), {@code created}, {@code labels},
   * {@code cpus}, {@code memoryBytes}, {@code pids}, and for a sandbox with timers {@code timers}
   * and {@code ends}; the local engine adds its own {@code egress}, {@code networks}, {@code
   * portUrl}, {@code diskBytes} and {@code diskInodes}.
   */
  static List<Map<String, Object>> rowsOf(WorkspaceProvider provider) {
    return switch (provider) {
      case HostWorkspaceProvider host ->
          host.list().stream().map(ref -> fields(ref, Map.of())).toList();
      case SupportsListing machines -> {
        boolean local = provider instanceof LocalSandbox;
        yield machines.list().stream().map(s -> fields(s, local)).toList();
      }
      default ->
          throw new UnsupportedOperationException(
              "provider '" + provider.name() + "' cannot list its workspaces");
    };
  }

  private static Map<String, Object> fields(SandboxInfo s, boolean local) {
    Map<String, Object> more = new LinkedHashMap<>();
    more.put("state", s.state());
    more.put("image", s.image());
    if (s.isolation() != null) { // the local engine's and a server's; docker does not say
      more.put("isolation", s.isolation());
    }
    more.put("created", seconds(s.created()));
    more.put("labels", new java.util.TreeMap<>(s.labels()));
    more.put("cpus", s.cpus());
    more.put("memoryBytes", s.memoryBytes());
    more.put("pids", s.pids());
    SandboxTimers t = s.timers();
    if (t != null) {
      Map<String, Object> timers = new LinkedHashMap<>();
      timers.put("autoSuspendSeconds", t.autoSuspendTimeout().toSeconds());
      timers.put("sandboxTimeoutSeconds", t.sandboxTimeout().toSeconds());
      timers.put("idleTimeoutSeconds", t.idleTimeout().toSeconds());
      timers.put("deleteAfter", seconds(t.deleteAfter()));
      more.put("timers", timers);
      more.put("ends", seconds(t.ends()));
    }
    if (local) { // the local engine's own facts
      more.put("egress", s.egress());
      more.put("networks", s.networks());
      more.put("portUrl", s.portUrl());
      more.put("diskBytes", s.diskBytes()); // 0: made before disks, no quota
      more.put("diskInodes", s.diskInodes());
    } else if (!s.networks().isEmpty()) {
      more.put("networks", s.networks()); // a docker sandbox's named networks
    }
    return fields(s.ref(), more);
  }

  private static String seconds(Instant instant) {
    return instant == null ? null : instant.truncatedTo(ChronoUnit.SECONDS).toString();
  }

  private static Map<String, Object> fields(WorkspaceRef ref, Map<String, Object> more) {
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("provider", ref.provider());
    fields.put("id", ref.id());
    fields.putAll(more);
    return fields;
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
