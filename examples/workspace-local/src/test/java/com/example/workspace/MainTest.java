package com.example.workspace;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class MainTest {
  @Test
  void theBuggyAddRunsInASandboxAndTheRefAttachesAgain() throws InterruptedException {
    Prerequisites.requireLocalSandboxes();
    String out = Main.run();
    assertTrue(out.matches("0 0 32 local:[a-z0-9]+"), out);
  }
}
