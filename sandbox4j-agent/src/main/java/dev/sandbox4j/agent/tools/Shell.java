package dev.sandbox4j.agent.tools;

import dev.sandbox4j.agent.Capability;
import dev.sandbox4j.agent.Param;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.ToolContext;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Gives the model commands in the run's workspace: {@code run_command} runs one and waits, {@code
 * start_command} / {@code check_command} / {@code stop_command} manage long-running ones (a server,
 * a watcher), and the opt-in {@code shell} tool does both in one (see {@link Builder#tools}).
 * Commands run as {@code sh -c <command>} in the workspace's working directory.
 *
 * <p>Output reaches the model as {@code [stdout]} and {@code [stderr]} sections (only the non-empty
 * ones, {@code (no output)} when both are empty), then {@code [exit code: N]} when the exit code is
 * not 0. Past {@link Builder#maxOutputChars} the <em>tail</em> is kept, under a marker that says
 * how many characters were cut, since errors and the exit code come last. A command past its
 * timeout is killed with everything it started, and the model reads its partial output and {@code
 * [Command timed out after Ns]}. While a foreground command runs, its output also goes to the run's
 * event listener ({@link ToolContext#emitOutput}).
 *
 * <p>Background commands belong to the run that started them: another run cannot see them, and they
 * are stopped (SIGTERM, then SIGKILL after {@link Builder#stopGrace}) when the run ends, since
 * their output is collected by this JVM. A process that must outlive the run can detach itself
 * ({@code nohup server > server.log 2>&1 &}).
 *
 * <p>The allowed and denied command lists are a guardrail against accidents, not a security
 * boundary (an interpreter can run anything); the sandbox is the boundary. Tool names, arguments
 * and output follow Pydantic AI Harness's {@code Shell}, so prompts written for it work here.
 * Immutable and thread-safe.
 */
public final class Shell implements Capability {

  /** The tools {@link #create()} gives: {@code run_command} and the background trio. */
  public static final List<String> DEFAULT_TOOLS =
      List.of("run_command", "start_command", "check_command", "stop_command");

  /** Every tool this capability can give, in registration order. */
  public static final List<String> ALL_TOOLS =
      List.of("run_command", "start_command", "check_command", "stop_command", "shell");

  /** Longest a {@code shell} call waits in the foreground before it returns the command's ID. */
  public static final Duration MAX_FOREGROUND_WAIT = Duration.ofSeconds(270);

  private final Duration defaultTimeout;
  private final int maxOutputChars;
  private final CommandPolicy policy;
  private final Duration stopGrace;
  private final List<Tool> tools;
  private final BackgroundJobs jobs = new BackgroundJobs();

  private Shell(Builder b) {
    this.defaultTimeout = b.defaultTimeout;
    this.maxOutputChars = b.maxOutputChars;
    this.policy = new CommandPolicy(b.allowedCommands, b.deniedCommands);
    this.stopGrace = b.stopGrace;
    if (b.tools.contains("shell") && defaultTimeout.compareTo(MAX_FOREGROUND_WAIT) > 0) {
      throw new IllegalArgumentException(
          "defaultTimeout must be at most "
              + MAX_FOREGROUND_WAIT.toSeconds()
              + "s when the shell tool is on (it is how long shell waits in the foreground), was "
              + defaultTimeout);
    }
    List<Tool> list = new ArrayList<>();
    for (String name : ALL_TOOLS) {
      if (b.tools.contains(name)) {
        list.add(tool(name));
      }
    }
    this.tools = List.copyOf(list);
  }

  /** A shell with the default tools and options. */
  public static Shell create() {
    return builder().build();
  }

  public static Builder builder() {
    return new Builder();
  }

  @Override
  public List<Tool> tools() {
    return tools;
  }

  /** Stops the background commands the run left running. */
  @Override
  public void afterRun(RunContext run, RunResult result) {
    jobs.stopAll(run, stopGrace);
  }

  /** Stops the background commands the failed run left running, then rethrows. */
  @Override
  public RunResult onRunError(RunContext run, RuntimeException error) {
    jobs.stopAll(run, stopGrace);
    throw error;
  }

  // --- tool arguments -------------------------------------------------------------------------

  record RunCommandArgs(
      @Param("The shell command to run, as for sh -c.") String command,
      @Param(
              value =
                  "Seconds to wait before the command is killed (default: the configured"
                      + " timeout, 30 unless changed).",
              required = false)
          Double timeoutSeconds) {}

  record StartCommandArgs(@Param("The shell command to run in the background.") String command) {}

  record CommandIdArgs(@Param("The ID that start_command or shell returned.") String commandId) {}

  record ShellArgs(
      @Param("The shell command to run, as for sh -c.") String command,
      @Param(
              value =
                  "Foreground only: seconds to wait for the command to end before returning its ID"
                      + " (default and maximum: 270).",
              required = false)
          Double timeoutSeconds,
      @Param(value = "true to return at once with the command's ID.", required = false)
          Boolean background) {}

  private Tool tool(String name) {
    return switch (name) {
      case "run_command" ->
          Tool.of(
              "run_command",
              "Run a shell command (sh -c) in the working directory and wait for it to finish."
                  + " Returns labelled [stdout] and [stderr] sections, then [exit code: N] when the"
                  + " exit code is not 0. stdin is empty. The command is killed, with everything it"
                  + " started, after timeout_seconds (default "
                  + ToolOutputs.seconds(defaultTimeout)
                  + "); you then get its partial output and [Command timed out after Ns]. Output"
                  + " over "
                  + maxOutputChars
                  + " characters keeps the end. For servers, watchers and other long-running"
                  + " commands use start_command instead.",
              RunCommandArgs.class,
              this::runCommand);
      case "start_command" ->
          Tool.of(
              "start_command",
              "Start a long-running command (a server, a watcher, a long build) in the background"
                  + " and return its ID at once. Call check_command with the ID to read its new"
                  + " output and status, and stop_command when you no longer need it. Background"
                  + " commands are stopped when this run ends.",
              StartCommandArgs.class,
              this::startCommand);
      case "check_command" ->
          Tool.of(
              "check_command",
              "Report the output a background command wrote since the previous check, and whether"
                  + " it is still running ([status: running]) or finished ([status: finished] and"
                  + " its [exit code: N]).",
              CommandIdArgs.class,
              this::checkCommand);
      case "stop_command" ->
          Tool.of(
              "stop_command",
              "Stop a background command (SIGTERM, then SIGKILL if it has not ended after "
                  + ToolOutputs.seconds(stopGrace)
                  + ") and return its remaining output and exit code. The ID is then forgotten.",
              CommandIdArgs.class,
              this::stopCommand);
      case "shell" ->
          Tool.of(
              "shell",
              "Run a shell command (sh -c) in the working directory. In the foreground (the"
                  + " default) it waits up to timeout_seconds (at most 270) and returns labelled"
                  + " [stdout]/[stderr] output and [exit code: N] when not 0; if the command is still"
                  + " running then, it keeps running and you get its output so far and its ID. With"
                  + " background=true it returns the ID at once. Use check_command with the ID for"
                  + " new output and status, and stop_command to stop it; background commands are"
                  + " stopped when this run ends.",
              ShellArgs.class,
              this::shell);
      default -> throw new IllegalArgumentException("unknown shell tool " + name);
    };
  }

  // --- tools ------------------------------------------------------------------------------------

  String runCommand(ToolContext ctx, RunCommandArgs args) {
    String command = checked(args.command());
    Duration timeout =
        ToolOutputs.timeout(
            args.timeoutSeconds(), defaultTimeout, Double.MAX_VALUE, "timeout_seconds");
    RunOptions options = live(ctx, RunOptions.builder().timeout(timeout), null).build();
    try {
      CommandResult result = ctx.workspace().run(Command.shell(command), options);
      return finished(result.stdoutText(), result.stderrText(), result.exitCode());
    } catch (WorkspaceTimeoutException e) {
      return ToolOutputs.withFooter(
          ToolOutputs.sections(e.partialStdoutText(), e.partialStderrText()),
          "(no output)",
          "[Command timed out after " + ToolOutputs.seconds(e.timeout()) + "]",
          maxOutputChars);
    } catch (WorkspaceOutputLimitException e) {
      return ToolOutputs.withFooter(
          ToolOutputs.sections(e.stdoutHeadText(), e.stderrHeadText()),
          "(no output)",
          "[Command killed: its output passed "
              + e.limit()
              + " bytes (stdout and stderr combined). Shown: the start of each stream, at most "
              + RunOptions.OUTPUT_LIMIT_KEPT_BYTES / 1024
              + " KiB each (cut to the end of that when long). Send the output to a file and read"
              + " parts of it, e.g. `<command> > out.log 2>&1; tail -n 100 out.log`.]",
          maxOutputChars);
    }
  }

  String startCommand(ToolContext ctx, StartCommandArgs args) {
    String command = checked(args.command());
    BackgroundCommand started =
        ctx.workspace().start(Command.shell(command), RunOptions.defaults());
    jobs.add(ctx.run(), new BackgroundJobs.Job(started));
    return started(command, started.id());
  }

  String checkCommand(ToolContext ctx, CommandIdArgs args) {
    BackgroundJobs.Job job = jobs.get(ctx.run(), args.commandId());
    if (job == null) {
      return unknown(ctx, args.commandId());
    }
    BackgroundCommand command = job.command();
    boolean running = command.isRunning();
    String output = take(job);
    List<String> footer = new ArrayList<>();
    if (running) {
      footer.add("[status: running]");
    } else {
      footer.add("[status: finished]");
      footer.addAll(ending(command));
    }
    return ToolOutputs.withFooter(
        output, "(no output yet)", String.join("\n", footer), maxOutputChars);
  }

  String stopCommand(ToolContext ctx, CommandIdArgs args) throws InterruptedException {
    BackgroundJobs.Job job = jobs.get(ctx.run(), args.commandId());
    if (job == null) {
      return unknown(ctx, args.commandId());
    }
    job.command().stop(stopGrace);
    jobs.remove(ctx.run(), args.commandId());
    List<String> footer = new ArrayList<>(List.of("[stopped]"));
    footer.addAll(ending(job.command()));
    return ToolOutputs.withFooter(
        take(job), "(no output)", String.join("\n", footer), maxOutputChars);
  }

  String shell(ToolContext ctx, ShellArgs args) throws InterruptedException {
    String command = checked(args.command());
    if (Boolean.TRUE.equals(args.background())) {
      BackgroundCommand started =
          ctx.workspace().start(Command.shell(command), RunOptions.defaults());
      jobs.add(ctx.run(), new BackgroundJobs.Job(started));
      return started(command, started.id());
    }
    Duration wait =
        ToolOutputs.timeout(
            args.timeoutSeconds(),
            defaultTimeout,
            MAX_FOREGROUND_WAIT.toMillis() / 1000.0,
            "timeout_seconds");
    AtomicBoolean live = new AtomicBoolean(true);
    BackgroundCommand started =
        ctx.workspace()
            .start(Command.shell(command), live(ctx, RunOptions.builder(), live).build());
    BackgroundJobs.Job job = new BackgroundJobs.Job(started);
    boolean ended;
    try {
      ended = started.await(wait);
    } catch (InterruptedException e) {
      started.kill();
      throw e;
    } finally {
      live.set(false);
    }
    if (ended) {
      // as run_command: an exit code of 0 goes without saying
      String footer = started.exitCode().orElse(-1) == 0 ? "" : String.join("\n", ending(started));
      return ToolOutputs.withFooter(take(job), "(no output)", footer, maxOutputChars);
    }
    jobs.add(ctx.run(), job);
    String id = started.id();
    return ToolOutputs.withFooter(
        take(job),
        "(no output yet)",
        "[status: running after "
            + ToolOutputs.seconds(wait)
            + "]\nID: "
            + id
            + "\nThe command keeps running: call check_command(command_id=\""
            + id
            + "\") for its new output and status, or stop_command(command_id=\""
            + id
            + "\") to stop it.",
        maxOutputChars);
  }

  // --- helpers ----------------------------------------------------------------------------------

  private String checked(String command) {
    if (command == null || command.isBlank()) {
      throw new ToolError("The command is empty: give a shell command to run.");
    }
    if (command.indexOf('\0') >= 0) {
      throw new ToolError("The command contains a NUL byte, which cannot be passed to a process.");
    }
    policy.check(command);
    return command;
  }

  private String finished(String stdout, String stderr, int exitCode) {
    return ToolOutputs.withFooter(
        ToolOutputs.sections(stdout, stderr),
        "(no output)",
        exitCode == 0 ? "" : "[exit code: " + exitCode + "]",
        maxOutputChars);
  }

  /** The exit code line, or why the command ended without one; nothing for a clean exit 0. */
  private static List<String> ending(BackgroundCommand command) {
    if (command.exitCode().isPresent()) {
      int code = command.exitCode().getAsInt();
      return List.of("[exit code: " + code + "]");
    }
    return command
        .failure()
        .map(WorkspaceException::getMessage)
        .map(message -> List.of("[error: " + message + "]"))
        .orElse(List.of());
  }

  private static String take(BackgroundJobs.Job job) {
    BackgroundCommand.Output output = job.command().takeOutput();
    String sections =
        ToolOutputs.sections(
            job.stdout().decode(output.stdout()), job.stderr().decode(output.stderr()));
    if (output.droppedBytes() > 0) {
      String note =
          "[... "
              + output.droppedBytes()
              + " bytes of earlier output were dropped because they were not checked in time]";
      return sections.isEmpty() ? note : note + "\n" + sections;
    }
    return sections;
  }

  private static String started(String command, String id) {
    return "Started background command: " + ToolOutputs.quote(command) + "\nID: " + id;
  }

  private String unknown(ToolContext ctx, String id) {
    List<String> known = jobs.ids(ctx.run());
    return "[Error: unknown command ID "
        + ToolOutputs.quote(id)
        + "]"
        + (known.isEmpty()
            ? " No background command of this run is known (a stopped one is forgotten)."
            : " Known IDs: " + String.join(", ", known) + ".");
  }

  /** Sends output chunks to the run's listener while {@code live} is unset or true. */
  private static RunOptions.Builder live(
      ToolContext ctx, RunOptions.Builder options, AtomicBoolean live) {
    ToolOutputs.ChunkDecoder out = new ToolOutputs.ChunkDecoder();
    ToolOutputs.ChunkDecoder err = new ToolOutputs.ChunkDecoder();
    return options
        .onStdout(chunk -> emit(ctx, "stdout", out.decode(chunk), live))
        .onStderr(chunk -> emit(ctx, "stderr", err.decode(chunk), live));
  }

  private static void emit(ToolContext ctx, String stream, String text, AtomicBoolean live) {
    if (!text.isEmpty() && (live == null || live.get())) {
      ctx.emitOutput(stream, text);
    }
  }

  /**
   * Options of a {@link Shell}. Defaults: the {@link #DEFAULT_TOOLS}, a 30 s timeout, 50,000
   * characters of output, no command lists, a 2 s grace before SIGKILL.
   */
  public static final class Builder {
    private Duration defaultTimeout = Duration.ofSeconds(30);
    private int maxOutputChars = 50_000;
    private List<String> allowedCommands = List.of();
    private List<String> deniedCommands = List.of();
    private Duration stopGrace = Duration.ofSeconds(2);
    private Set<String> tools = new LinkedHashSet<>(DEFAULT_TOOLS);

    private Builder() {}

    /**
     * The timeout of a {@code run_command} the model gives none for, and how long {@code shell}
     * waits in the foreground (at most 270 s when that tool is on).
     */
    public Builder defaultTimeout(Duration timeout) {
      Objects.requireNonNull(timeout, "timeout");
      if (timeout.isZero() || timeout.isNegative()) {
        throw new IllegalArgumentException("defaultTimeout must be positive, was " + timeout);
      }
      this.defaultTimeout = timeout;
      return this;
    }

    /** Characters of output the model reads per call; past it the tail is kept. */
    public Builder maxOutputChars(int chars) {
      if (chars < 200) {
        throw new IllegalArgumentException("maxOutputChars must be at least 200, was " + chars);
      }
      this.maxOutputChars = chars;
      return this;
    }

    /**
     * Only these commands may run (each entry one or more words, such as {@code ls} or {@code git
     * status}); empty for no allowlist. Exclusive with {@link #deniedCommands}.
     */
    public Builder allowedCommands(List<String> commands) {
      this.allowedCommands = List.copyOf(commands);
      return this;
    }

    /**
     * These commands are refused without running (each entry one or more words, such as {@code rm}
     * or {@code git push}). Exclusive with {@link #allowedCommands}.
     */
    public Builder deniedCommands(List<String> commands) {
      this.deniedCommands = List.copyOf(commands);
      return this;
    }

    /** How long a stopped command gets between SIGTERM and SIGKILL. */
    public Builder stopGrace(Duration grace) {
      Objects.requireNonNull(grace, "grace");
      if (grace.isNegative()) {
        throw new IllegalArgumentException("stopGrace must not be negative, was " + grace);
      }
      this.stopGrace = grace;
      return this;
    }

    /**
     * Which tools to give, from {@link #ALL_TOOLS}; {@link #DEFAULT_TOOLS} by default.
     *
     * @throws IllegalArgumentException for an unknown or no name
     */
    public Builder tools(String... names) {
      Set<String> chosen = new LinkedHashSet<>(List.of(names));
      for (String name : chosen) {
        if (!ALL_TOOLS.contains(name)) {
          throw new IllegalArgumentException(
              "unknown shell tool '" + name + "'; the tools are " + ALL_TOOLS);
        }
      }
      if (chosen.isEmpty()) {
        throw new IllegalArgumentException("a Shell needs at least one tool");
      }
      this.tools = chosen;
      return this;
    }

    /**
     * @throws IllegalArgumentException if both command lists are set, or the {@code shell} tool is
     *     on with a default timeout over 270 s
     */
    public Shell build() {
      if (!allowedCommands.isEmpty() && !deniedCommands.isEmpty()) {
        throw new IllegalArgumentException(
            "give allowedCommands or deniedCommands, not both: an allowlist already refuses"
                + " everything else");
      }
      return new Shell(this);
    }
  }
}
