package com.example.remote;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MainTest {
  @Test
  void aSandboxMadeThroughTheServerRunsCommandsAndIsListed(@TempDir Path serverData) {
    Prerequisites.requireLocalSandboxes();
    assertEquals(
        "hello from a sandbox\nlisted: true\ngone: true"
            + "\nmcp: hello via MCP (1 sandbox labelled via=mcp)",
        Main.run(serverData));
  }
}
