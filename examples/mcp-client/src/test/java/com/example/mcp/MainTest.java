package com.example.mcp;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class MainTest {
  @Test
  void anMcpClientListsTheToolsAndRunsThemInASandbox() throws Exception {
    Prerequisites.requireLocalSandboxes();
    String out = Main.run();
    assertTrue(
        out.startsWith(
            "tools: check_command,edit_file,find_files,grep,list_directory,read_file,shell,"
                + "stop_command,write_file\n"),
        out);
    assertTrue(out.contains("\nshell: ") && out.contains("from MCP"), out);
  }
}
