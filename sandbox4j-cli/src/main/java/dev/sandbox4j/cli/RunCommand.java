package dev.sandbox4j.cli;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Messages;
import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code sandbox4j run TASK}: an agent with the Coder tools works on a task in a sandbox. */
@CommandLine.Command(
    name = "run",
    mixinStandardHelpOptions = true,
    description = {
      "Runs an AI agent on TASK. Its shell and file tools (Coder: read/write/edit files, grep,"
          + " a shell) act in a sandbox, not on this machine.",
      "",
      "The model's answer goes to stdout; its tool calls, command output and edits (as diffs)"
          + " to stderr as they happen. With --history FILE the conversation is saved to FILE"
          + " (JSON), and a later run with the same FILE continues it in the same sandbox.",
      "The sandbox keeps running after the run: remove it with 'sandbox4j rm REF'."
    })
final class RunCommand implements Callable<Integer> {

  static final String MODEL_VARIABLE = "SANDBOX4J_MODEL";
  static final String DEFAULT_MODEL = "anthropic:claude-sonnet-4-5";

  @ParentCommand SandboxCommand root;
  @Spec CommandSpec spec;

  @Parameters(index = "0", paramLabel = "TASK", description = "What the agent should do.")
  String task;

  @Option(
      names = {"-m", "--model"},
      paramLabel = "MODEL",
      description =
          "provider:model, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-5 (keys from"
              + " ANTHROPIC_API_KEY / OPENAI_API_KEY; base URLs from ANTHROPIC_BASE_URL /"
              + " OPENAI_BASE_URL). Default: $"
              + MODEL_VARIABLE
              + ", else "
              + DEFAULT_MODEL
              + ".")
  String model;

  @Option(
      names = "--workspace",
      paramLabel = "new|REF",
      description =
          "'new' for a fresh sandbox even when the history names one, or the ref of a sandbox to"
              + " work in. Default: the history's sandbox, else a new one.")
  String workspace;

  @Option(
      names = "--history",
      paramLabel = "FILE",
      description = "Continue the conversation saved in FILE (if it exists) and save it there.")
  Path history;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description =
          "Where a new sandbox is created: local (isolated), remote (a server's), docker (a Docker daemon's containers) or host (not isolated). Default:"
              + " remote with a server (--server), else local.")
  String provider;

  @Option(
      names = "--max-requests",
      paramLabel = "N",
      description = "Stop the run after this many model requests. Default: ${DEFAULT-VALUE}.",
      defaultValue = "50")
  int maxRequests;

  @CommandLine.Mixin IsolationOption isolation;

  @Override
  public Integer call() {
    provider = root.providerOrDefault(provider);
    List<Message> past = history == null ? List.of() : readHistory(history);
    String modelName = model != null ? model : System.getenv().getOrDefault(MODEL_VARIABLE, "");
    if (modelName.isBlank()) {
      modelName = DEFAULT_MODEL;
    }
    Model chosen;
    try {
      chosen = Model.of(modelName);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage(), e);
    }
    RunConfig.Builder config = RunConfig.builder().messageHistory(past).maxRequests(maxRequests);
    String providerName = provider;
    if (workspace != null && workspace.equals(SandboxCommand.NEW)) {
      config.newWorkspace();
    } else if (workspace != null) {
      WorkspaceRef ref = root.parseRef(spec, workspace);
      isolation.refuseFor(spec, ref);
      providerName = ref.provider();
      config.workspace(ref);
    } else {
      Optional<WorkspaceRef> previous = Messages.latestWorkspace(past);
      if (previous.isPresent()) {
        WorkspaceRef ref = root.parseRef(spec, previous.get().toString());
        isolation.refuseFor(spec, ref); // the history's sandbox; --workspace new makes another
        providerName = ref.provider();
      }
    }
    root.warnIfNotIsolated(providerName);
    Agent agent =
        Agent.builder()
            .model(chosen)
            .capability(
                WorkspaceCapability.of(
                    root.provider(
                        spec,
                        providerName,
                        Providers.Settings.DEFAULTS.withIsolation(isolation.isolation))))
            .capability(Coder.create())
            .build();
    runAndReport(root, agent, task, config, history);
    return ExitCodes.OK;
  }

  /** Runs the agent, shows its events, saves the history, and names the sandbox it used. */
  static RunResult runAndReport(
      SandboxCommand root, Agent agent, String task, RunConfig.Builder config, Path history) {
    EventPrinter printer = new EventPrinter(root.context().out(), root.context().err());
    RunResult result = agent.runStreaming(task, config.build(), printer);
    printer.endText();
    if (history != null) {
      writeHistory(history, result.allMessages());
    }
    var err = root.context().err();
    err.println();
    result
        .workspace()
        .ifPresentOrElse(
            ref -> err.println("Sandbox: " + ref + " (it keeps running: sandbox4j rm " + ref + ")"),
            () -> err.println("Sandbox: none (the agent used no tool)"));
    if (history != null) {
      err.println(
          "History: " + history + " (continue: sandbox4j run --history " + history + " \"…\")");
    }
    err.println(
        "Usage: "
            + result.usage().requests()
            + " model requests, "
            + result.usage().toolCalls()
            + " tool calls, "
            + result.usage().inputTokens()
            + " input and "
            + result.usage().outputTokens()
            + " output tokens");
    return result;
  }

  static List<Message> readHistory(Path file) {
    try (InputStream in = Files.newInputStream(file)) {
      return Messages.readJson(in);
    } catch (NoSuchFileException e) {
      return List.of();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the history " + file, e);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(file + ": " + e.getMessage(), e);
    }
  }

  /** Writes the history whole or not at all: temp file, fsync, rename. */
  static void writeHistory(Path file, List<Message> messages) {
    Path target = file.toAbsolutePath();
    Path temp = target.resolveSibling("." + target.getFileName() + ".tmp");
    try {
      try (OutputStream out = Files.newOutputStream(temp);
          var channel =
              java.nio.channels.FileChannel.open(temp, java.nio.file.StandardOpenOption.WRITE)) {
        Messages.writeJson(messages, out);
        out.flush();
        channel.force(true);
      }
      try {
        Files.move(
            temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the history " + file, e);
    }
  }
}
