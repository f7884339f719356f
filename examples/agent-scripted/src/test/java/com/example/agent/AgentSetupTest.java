package com.example.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.models.FunctionModel;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

class AgentSetupTest {
  @Test
  void theOwnToolRunsInTheSandboxAndTheHookDestroysItWhenTheRunFails() {
    Prerequisites.requireLocalSandboxes();
    List<String> toolOutput = new CopyOnWriteArrayList<>();
    FunctionModel toolUser =
        FunctionModel.of(
            request -> {
              RequestMessage latest = (RequestMessage) request.messages().getLast();
              for (RequestPart part : latest.parts()) {
                if (part instanceof RequestPart.ToolReturn result) {
                  toolOutput.add(result.content());
                  throw new IllegalStateException("the model's provider is down");
                }
              }
              return ResponseMessage.toolCall("1", "program_version", "{\"name\":\"python3\"}");
            });

    String out =
        AgentSetup.run(FunctionModel.of(request -> ResponseMessage.text("Done.")), toolUser);

    assertEquals(
        "Done.\nsandbox after the run: true\nthe failed run: the model's provider is down"
            + "\nsandbox after the failed run: false",
        out);
    assertEquals(1, toolOutput.size(), toolOutput.toString());
    assertEquals(true, toolOutput.getFirst().startsWith("Python 3."), toolOutput.toString());
  }
}
