package com.example.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class MainTest {
  @Test
  void theFollowUpRunChangesTheProgramInTheSameSandbox() {
    Prerequisites.requireLocalSandboxes();
    assertEquals(
        "It printed: Hello\nIt printed: Bonjour\nsame sandbox: true\nhello.py: print('Bonjour')",
        Main.run(new ScriptedModel()));
  }
}
