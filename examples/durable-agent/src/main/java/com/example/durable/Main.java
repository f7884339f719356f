package com.example.durable;

import dev.sandbox4j.agent.Agent;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.WorkspaceCapability;
import dev.sandbox4j.agent.models.FunctionModel;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.temporal.AgentWorkflow;
import dev.sandbox4j.temporal.DurableAgent;
import dev.sandbox4j.temporal.DurableRunRequest;
import dev.sandbox4j.temporal.DurableRunResult;
import io.temporal.client.WorkflowClient;
import io.temporal.client.WorkflowStub;
import io.temporal.serviceclient.WorkflowServiceStubs;
import io.temporal.serviceclient.WorkflowServiceStubsOptions;
import io.temporal.testing.TestWorkflowEnvironment;
import io.temporal.worker.WorkerFactory;

/**
 * A durable agent run on Temporal: a scripted model writes a program in a local sandbox and runs
 * it; a second run continues in the same sandbox. With an address ({@code localhost:7233}, the
 * Temporal CLI's {@code temporal server start-dev}) it uses that server; without one, the Temporal
 * SDK's in-process test server.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    if (args.length > 0) {
      WorkflowServiceStubs service =
          WorkflowServiceStubs.newServiceStubs(
              WorkflowServiceStubsOptions.newBuilder().setTarget(args[0]).build());
      try {
        System.out.println(run(WorkflowClient.newInstance(service)));
      } finally {
        service.shutdown();
      }
    } else {
      try (TestWorkflowEnvironment server = TestWorkflowEnvironment.newInstance()) {
        System.out.println(run(server.getWorkflowClient()));
      }
    }
  }

  /** The two runs' answers, and whether they used the same sandbox. */
  static String run(WorkflowClient client) {
    LocalSandbox sandboxes = new LocalSandbox();
    Agent agent =
        Agent.builder()
            .model(FunctionModel.of("scripted", Main::script))
            .capability(WorkspaceCapability.of(sandboxes))
            .capability(Coder.create())
            .build();

    // [durable]
    DurableAgent durable = DurableAgent.of(agent);
    WorkerFactory workers = WorkerFactory.newInstance(client);
    durable.register(workers.newWorker("agents")); // in each worker process
    workers.start();
    try {
      AgentWorkflow run =
          DurableAgent.start(
              client,
              "agents",
              "hello-" + System.nanoTime(),
              DurableRunRequest.of("Write hello.py and run it."));
      DurableRunResult first = WorkflowStub.fromTyped(run).getResult(DurableRunResult.class);
      AgentWorkflow again =
          DurableAgent.start(
              client,
              "agents",
              "hello-again-" + System.nanoTime(),
              DurableRunRequest.continuing("Run it once more.", first.messageList()));
      DurableRunResult next = WorkflowStub.fromTyped(again).getResult(DurableRunResult.class);
      first.workspaceRef().ifPresent(sandboxes::destroy); // Temporal never destroys a sandbox
      // [/durable]
      return first.output()
          + "\n"
          + next.output()
          + "\nsame sandbox: "
          + first.workspaceRef().equals(next.workspaceRef());
    } finally {
      workers.shutdownNow();
    }
  }

  /** The scripted model: write the program, run it, report what it printed. */
  private static ResponseMessage script(ModelRequest request) {
    RequestMessage last = (RequestMessage) request.messages().getLast();
    if (last.parts().getFirst() instanceof RequestPart.UserPrompt prompt) {
      return prompt.text().startsWith("Write")
          ? ResponseMessage.toolCall(
              "1", "write_file", "{\"path\": \"hello.py\", \"content\": \"print('Hello')\\n\"}")
          : ResponseMessage.toolCall("3", "shell", "{\"command\": \"python3 hello.py\"}");
    }
    if (!(last.parts().getFirst() instanceof RequestPart.ToolReturn result)) {
      return ResponseMessage.text("unexpected: " + last.parts().getFirst());
    }
    return result.toolName().equals("write_file")
        ? ResponseMessage.toolCall("2", "shell", "{\"command\": \"python3 hello.py\"}")
        : ResponseMessage.text(
            "It printed: " + result.content().lines().reduce((a, b) -> b).orElse(""));
  }
}
