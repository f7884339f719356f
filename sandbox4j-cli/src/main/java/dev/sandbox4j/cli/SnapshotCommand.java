package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.io.PrintStream;
import java.time.temporal.ChronoUnit;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j snapshot ID NAME | snapshot ls | snapshot rm NAME... | snapshot push NAME REF}.
 */
@Command(
    name = "snapshot",
    mixinStandardHelpOptions = true,
    description = {
      "Saves a sandbox's files as a snapshot NAME and prints NAME: an image new sandboxes"
          + " start from ('sandbox4j create --snapshot NAME') with the sandbox's size.",
      "A running sandbox is frozen while its files are copied. A snapshot of the same name is"
          + " replaced; another image is not. 'snapshot ls' lists them, 'snapshot rm' removes"
          + " them."
    },
    subcommands = {
      SnapshotCommand.ListSnapshots.class,
      SnapshotCommand.Remove.class,
      SnapshotCommand.Push.class
    })
final class SnapshotCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(index = "0", arity = "0..1", paramLabel = "ID", description = "The sandbox.")
  String ref;

  @Parameters(index = "1", arity = "0..1", paramLabel = "NAME", description = "The snapshot.")
  String name;

  @Option(
      names = "--json",
      description =
          "Print the snapshot as 'snapshot ls --json' shows it instead of its name, and no"
              + " progress.")
  boolean json;

  @Override
  public Integer call() {
    if (ref == null || name == null) {
      throw new ParameterException(
          spec.commandLine(), "expected ID NAME, or a command: ls, rm or push");
    }
    WorkspaceRef source = StateCommands.machineRefs(root, spec, List.of(ref)).getFirst();
    SnapshotInfo saved;
    try (var task = root.task("saving snapshot " + name + " of " + source, true, json)) {
      saved = root.machinesOf(source).snapshot(source, name);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
    root.context().out().println(json ? Json.write(ListSnapshots.fields(saved)) : saved.name());
    return ExitCodes.OK;
  }

  /** {@code snapshot ls [--json]}. */
  @Command(
      name = "ls",
      mixinStandardHelpOptions = true,
      description =
          "Lists the snapshots, sorted by name: a table with a heading, or nothing if there are"
              + " none.")
  static final class ListSnapshots implements Callable<Integer> {
    @ParentCommand SnapshotCommand snapshot;

    @Option(
        names = "--json",
        description =
            "Print a JSON array of {\"name\",\"created\",\"source\",\"image\",\"cpus\","
                + "\"memoryBytes\",\"pids\",\"sizeBytes\"} instead.")
    boolean json;

    /** A snapshot as the server's {@code Snapshot} object names its fields. */
    static Map<String, Object> fields(SnapshotInfo s) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("name", s.name());
      m.put(
          "created",
          s.created() == null ? null : s.created().truncatedTo(ChronoUnit.SECONDS).toString());
      m.put("source", s.source() == null ? null : s.source().toString());
      m.put("image", s.image());
      m.put("cpus", s.cpus());
      m.put("memoryBytes", s.memoryBytes());
      m.put("pids", s.pids());
      m.put("sizeBytes", s.sizeBytes());
      return m;
    }

    @Override
    public Integer call() {
      SandboxCommand root = snapshot.root;
      List<SnapshotInfo> all = root.machines().snapshots();
      PrintStream out = root.context().out();
      if (json) {
        out.println(Json.write(all.stream().map(ListSnapshots::fields).toList()));
        return ExitCodes.OK;
      }
      if (all.isEmpty()) {
        return ExitCodes.OK;
      }
      int nameWidth = Math.max(4, all.stream().mapToInt(s -> s.name().length()).max().orElse(0));
      String format = "%-" + nameWidth + "s  %-20s  %-19s  %4s  %8s  %s%n";
      out.printf(format, "NAME", "CREATED", "SOURCE", "CPUS", "SIZE", "IMAGE");
      for (SnapshotInfo s : all) {
        out.printf(
            format,
            s.name(),
            s.created() == null ? "-" : s.created().truncatedTo(ChronoUnit.SECONDS),
            s.source() == null ? "-" : s.source(),
            s.cpus(),
            s.sizeBytes() / (1024 * 1024) + " MiB",
            s.image());
      }
      return ExitCodes.OK;
    }
  }

  /** {@code snapshot rm NAME...}. */
  @Command(
      name = "rm",
      mixinStandardHelpOptions = true,
      description =
          "Removes snapshots and prints each name; one that does not exist is not an error."
              + " Sandboxes made from a snapshot keep running on its files.")
  static final class Remove implements Callable<Integer> {
    @ParentCommand SnapshotCommand snapshot;
    @Spec CommandSpec spec;

    @Parameters(arity = "1..*", paramLabel = "NAME", description = "Snapshots to remove.")
    List<String> names;

    @Option(
        names = "--json",
        description = "Print a JSON array of the names instead, one line per name.")
    boolean json;

    @Override
    public Integer call() {
      Machines sandboxes = snapshot.root.machines();
      for (String name : names) {
        try {
          sandboxes.removeSnapshot(name);
        } catch (IllegalArgumentException e) {
          throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
        if (!json) {
          snapshot.root.context().out().println(name);
        }
      }
      if (json) {
        snapshot.root.context().out().println(Json.write(names));
      }
      return ExitCodes.OK;
    }
  }

  /** {@code snapshot push NAME REF}. */
  @Command(
      name = "push",
      mixinStandardHelpOptions = true,
      description = {
        "Pushes a snapshot of this machine's sandboxes to a registry as an OCI image, as 'image"
            + " push' does, and prints REF@DIGEST: 'create --image REF@DIGEST' on another host"
            + " starts from its files. Its size (cpus, memory, pids, disk) goes into labels"
            + " dev.sandbox4j.snapshot.*. Needs root."
      })
  static final class Push implements Callable<Integer> {
    @ParentCommand SnapshotCommand snapshot;
    @Spec CommandSpec spec;

    @Parameters(index = "0", paramLabel = "NAME", description = "The snapshot.")
    String name;

    @Parameters(
        index = "1",
        paramLabel = "REF",
        description = "Where to: NAME:TAG with the registry's host, e.g. ghcr.io/org/snap:1.")
    String reference;

    @Mixin RegistryOptions registry;

    @Override
    public Integer call() throws java.io.IOException {
      LocalSandbox sandboxes = registry.sandboxes(snapshot.root);
      if (sandboxes.snapshots().stream().noneMatch(s -> s.name().equals(name))) {
        throw new ParameterException(
            spec.commandLine(),
            "no snapshot '" + name + "' of local sandboxes: see 'sandbox4j snapshot ls'");
      }
      snapshot
          .root
          .context()
          .out()
          .println(ImageCommand.Push.push(snapshot.root, sandboxes, name, reference));
      return ExitCodes.OK;
    }
  }
}
