package dev.sandbox4j.mcp;

import static dev.sandbox4j.mcp.NodeMcpClient.assertListsAndCalls;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The stdio server as a client we did not write sees it: the official TypeScript SDK starts the
 * server as a child process and calls its tools.
 */
class McpToolServerClientTest {

  @BeforeAll
  static void installClient() throws Exception {
    NodeMcpClient.install();
  }

  @Test
  void theTypeScriptSdkListsAndCallsTheCoderToolsInAHostWorkspace(@TempDir Path root)
      throws Exception {
    JsonNode result = runClient(root, List.of("host", root.toString()));
    assertListsAndCalls(result);
    assertThat(Files.readString(root.resolve(onlyWorkspace(root), "hello.txt")))
        .isEqualTo("hello from mcp\n");
  }

  @Test
  void theTypeScriptSdkListsAndCallsTheCoderToolsInALocalSandbox(@TempDir Path logs)
      throws Exception {
    NodeMcpClient.requireLocalEngine();
    NodeMcpClient.warmUpLocalEngine();
    assertListsAndCalls(runClient(logs, List.of("local")));
  }

  /** Runs the client against {@link ServerMain} with {@code serverArgs}; its JSON output. */
  private static JsonNode runClient(Path logs, List<String> serverArgs) throws Exception {
    return NodeMcpClient.run(
        NodeMcpClient.javaCommand(ServerMain.class.getName(), serverArgs),
        Map.of(),
        logs.resolveSibling(logs.getFileName() + "-stderr.log"));
  }

  private static String onlyWorkspace(Path root) throws IOException {
    try (var dirs = Files.list(root)) {
      List<Path> all = dirs.filter(Files::isDirectory).toList();
      assertThat(all).hasSize(1);
      return all.getFirst().getFileName().toString();
    }
  }
}
