package com.example.agent;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.RunConfig;
import dev.sandbox4j.agent.RunResult;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;

/**
 * An agent writes a program in a local sandbox, then changes it in a follow-up run in the same
 * sandbox. With no argument a scripted model ({@link ScriptedModel}) plays the agent; with a model
 * name (e.g. {@code anthropic:claude-sonnet-4-5} and {@code ANTHROPIC_API_KEY} set) a real one
 * does.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    Model model = args.length > 0 ? Model.of(args[0]) : new ScriptedModel();
    System.out.println(run(model));
  }

  /** Both runs' answers and the program as the second run left it. */
  static String run(Model model) {
    // [agent]
    LocalSandbox sandboxes = new LocalSandbox();
    Agent agent =
        Agent.builder()
            .model(model) // or .model("anthropic:claude-sonnet-4-5")
            .capability(WorkspaceCapability.of(sandboxes)) // where the workspace lives
            .capability(Coder.create()) // read/write/edit files, grep, a shell
            .build();
    RunResult first = agent.runSync("Write hello.py and run it.");
    RunResult next =
        agent.runSync("Make it greet in French.", RunConfig.continuing(first.allMessages()));
    String report = report(sandboxes, first, next);
    first.workspace().ifPresent(sandboxes::destroy); // the agent never destroys a sandbox
    // [/agent]
    return report;
  }

  private static String report(LocalSandbox sandboxes, RunResult first, RunResult next) {
    Workspace ws = Workspace.of(sandboxes.backend(next.workspace().orElseThrow()).orElseThrow());
    return first.output()
        + "\n"
        + next.output()
        + "\nsame sandbox: "
        + first.workspace().equals(next.workspace())
        + "\nhello.py: "
        + ws.readText("hello.py").strip();
  }
}
