package com.example.agent;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.Hooks;
import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.Param;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * The user guide's agent: a sandbox with a project directory, instructions, a tool of your own, and
 * a hook that destroys the sandbox when a run fails.
 */
final class AgentSetup {
  private AgentSetup() {}

  /**
   * A run with {@code model}, then a run with {@code toolUser} in the same sandbox, which has the
   * tool of this class and fails at its end: the hook destroys the sandbox.
   *
   * @return the first run's output, and whether the sandbox still existed after each run
   */
  static String run(Model model, Model toolUser) {
    // [agents]
    LocalSandbox sandboxes =
        LocalSandbox.builder().workingDirectory("/home/sandbox/project").build();
    Agent agent =
        Agent.builder()
            .model(model) // or "anthropic:claude-sonnet-4-5", "openai:gpt-5"
            .instructions("You are a careful engineer.")
            .capability(WorkspaceCapability.of(sandboxes))
            .capability(Coder.create()) // or Shell.create() + FileSystem.create()
            .build();
    RunResult result = agent.runSync("Make the tests pass.");
    result.output(); // the model's final text
    result.workspace(); // Optional<WorkspaceRef>: the sandbox it used — store it
    result.allMessages(); // the history: pass it to the next run to continue there
    result.usage(); // requests, input/output tokens, tool calls
    // [/agents]
    WorkspaceRef ref = result.workspace().orElseThrow();
    boolean existed = sandboxes.info(ref).isPresent();

    // [own-tool]
    record Program(@Param("the program's name, e.g. python3") String name) {}
    Tool version =
        Tool.of(
            "program_version",
            "Prints the version of a program in the workspace.",
            Program.class,
            (ctx, args) ->
                ctx.workspace().run(Command.argv(args.name(), "--version")).stdoutText());
    // [/own-tool]
    // [cleanup-hook]
    Hooks cleanup =
        Hooks.builder()
            .onRunError(
                (run, error) -> {
                  run.workspaceRef().ifPresent(sandboxes::destroy);
                  throw error; // or return a RunResult to recover
                })
            .build();
    // [/cleanup-hook]
    Agent withTool =
        Agent.builder()
            .model(toolUser)
            .capability(WorkspaceCapability.of(sandboxes))
            .tool(version)
            .capability(cleanup)
            .build();
    String failure;
    try {
      withTool.runSync("Which python3 is there?", RunConfig.builder().workspace(ref).build());
      failure = "none";
    } catch (RuntimeException e) {
      failure = e.getMessage();
    }
    return result.output()
        + "\nsandbox after the run: "
        + existed
        + "\nthe failed run: "
        + failure
        + "\nsandbox after the failed run: "
        + sandboxes.info(ref).isPresent();
  }
}
