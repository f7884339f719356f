package com.example.durable;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.temporal.testing.TestWorkflowEnvironment;
import org.junit.jupiter.api.Test;

class MainTest {
  @Test
  void bothDurableRunsWorkInTheSameSandbox() {
    Prerequisites.requireLocalSandboxes();
    try (TestWorkflowEnvironment server = TestWorkflowEnvironment.newInstance()) {
      assertEquals(
          "It printed: Hello\nIt printed: Hello\nsame sandbox: true",
          Main.run(server.getWorkflowClient()));
    }
  }
}
