package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.BiConsumer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code sandbox4j suspend|resume|stop|start|hibernate ID...}: a sandbox's state, on this machine
 * or on the server ({@link Machines}). Each prints every ref once done; every ref is checked before
 * any sandbox is changed.
 */
final class StateCommands {
  private StateCommands() {}

  /** What the five have in common. */
  abstract static class Change implements Callable<Integer> {
    @ParentCommand SandboxCommand root;
    @Spec CommandSpec spec;

    @Parameters(
        arity = "1..*",
        paramLabel = "ID",
        description = "Sandbox refs or ids (local, or remote with a server).")
    List<String> refs;

    @Option(
        names = "--json",
        description =
            "Once every sandbox has changed, print a JSON array of them as 'ls --json' shows them"
                + " (state included) instead of their refs; no progress.")
    boolean json;

    abstract BiConsumer<Machines, WorkspaceRef> change();

    /** What the progress line says while a sandbox changes, e.g. {@code hibernating}. */
    abstract String doing();

    /**
     * Whether the change is known to take a while (a checkpoint), so that plain progress names it
     * at once; the others show only on a terminal, or when a step is reported.
     */
    boolean known() {
      return false;
    }

    @Override
    public Integer call() {
      List<WorkspaceRef> parsed = machineRefs(root, spec, refs);
      for (WorkspaceRef ref : parsed) {
        try (var task = root.task(doing() + " " + ref, known(), json)) {
          change().accept(root.machinesOf(ref), ref);
        }
        if (!json) {
          root.context().out().println(ref);
        }
      }
      if (json) {
        Map<String, Map<String, Object>> listed = new HashMap<>();
        for (String provider : parsed.stream().map(WorkspaceRef::provider).distinct().toList()) {
          for (Map<String, Object> row : ListCommand.rowsOf(root.provider(spec, provider))) {
            listed.put(row.get("provider") + ":" + row.get("id"), row);
          }
        }
        List<Map<String, Object>> rows = new ArrayList<>();
        for (WorkspaceRef ref : parsed) {
          // gone meanwhile (a timer destroyed it): the ref alone
          rows.add(listed.getOrDefault(ref.toString(), Json.ref(ref)));
        }
        root.context().out().println(Json.write(rows));
      }
      return ExitCodes.OK;
    }
  }

  /**
   * Parses refs that must all be sandboxes of {@link SandboxCommand#machines()} (local ones, or
   * remote ones with a server); a usage error otherwise.
   */
  static List<WorkspaceRef> machineRefs(SandboxCommand root, CommandSpec spec, List<String> refs) {
    List<WorkspaceRef> parsed = refs.stream().map(text -> root.parseRef(spec, text)).toList();
    for (WorkspaceRef ref : parsed) {
      Machines machines = root.machinesOf(ref);
      if (!ref.provider().equals(machines.name())) {
        throw new ParameterException(
            spec.commandLine(),
            ref
                + " is a "
                + ref.provider()
                + " workspace: only "
                + machines.name()
                + " sandboxes have this");
      }
      root.backend(spec, root.provider(spec, machines.name()), ref); // validates the id; no I/O
    }
    return parsed;
  }

  @Command(
      name = "suspend",
      mixinStandardHelpOptions = true,
      description = {
        "Suspends sandboxes: freezes every process, keeping its memory; prints each ref.",
        "Any later use (exec, cp, shell, resume) thaws it. A stopped sandbox stays stopped."
      })
  static final class Suspend extends Change {
    @Override
    String doing() {
      return "suspending";
    }

    @Override
    BiConsumer<Machines, WorkspaceRef> change() {
      return Machines::suspend;
    }
  }

  @Command(
      name = "hibernate",
      mixinStandardHelpOptions = true,
      description = {
        "Hibernates sandboxes: saves every process to disk (checkpoint/restore) and ends them,"
            + " freeing their memory; prints each ref.",
        "Any later use (exec, cp, shell, resume) restores them where they were. Commands still"
            + " attached (exec without --detach) are ended; processes started in the background"
            + " from a command are kept. A stopped sandbox stays stopped. Fails, saying why,"
            + " where checkpoint/restore is unavailable (see doctor; setup installs it)."
      })
  static final class Hibernate extends Change {
    @Override
    String doing() {
      return "hibernating";
    }

    @Override
    boolean known() {
      return true;
    }

    @Override
    BiConsumer<Machines, WorkspaceRef> change() {
      return Machines::hibernate;
    }
  }

  @Command(
      name = "resume",
      mixinStandardHelpOptions = true,
      description =
          "Resumes suspended sandboxes (and starts stopped ones, restores hibernated ones); prints"
              + " each ref. Any use of a"
              + " sandbox does this by itself.")
  static final class Resume extends Change {
    @Override
    String doing() {
      return "resuming";
    }

    @Override
    BiConsumer<Machines, WorkspaceRef> change() {
      return Machines::resume;
    }
  }

  @Command(
      name = "stop",
      mixinStandardHelpOptions = true,
      description = {
        "Stops sandboxes: ends every process and unmounts the files, which are kept; prints each"
            + " ref.",
        "Any later use (exec, cp, shell, start) starts it again, without the old processes."
      })
  static final class Stop extends Change {
    @Override
    String doing() {
      return "stopping";
    }

    @Override
    BiConsumer<Machines, WorkspaceRef> change() {
      return Machines::stop;
    }
  }

  @Command(
      name = "start",
      mixinStandardHelpOptions = true,
      description =
          "Starts stopped sandboxes (and resumes suspended ones, restores hibernated ones); prints"
              + " each ref. Any use of a"
              + " sandbox does this by itself.")
  static final class Start extends Change {
    @Override
    String doing() {
      return "starting";
    }

    @Override
    BiConsumer<Machines, WorkspaceRef> change() {
      return Machines::start;
    }
  }
}
