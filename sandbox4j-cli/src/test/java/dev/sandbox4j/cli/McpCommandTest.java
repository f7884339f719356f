package dev.sandbox4j.cli;

import static dev.sandbox4j.mcp.NodeMcpClient.assertListsAndCalls;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.mcp.NodeMcpClient;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code sandbox4j mcp} as an MCP client starts it: the official TypeScript SDK's stdio client runs
 * the CLI's {@link Main} in a child JVM, lists the tools and calls them.
 */
class McpCommandTest {

  private static final Pattern CREATED =
      Pattern.compile("sandbox4j: created sandbox ((?:local|host):[a-z0-9]+)");

  @TempDir Path temp;

  @BeforeAll
  static void installClient() throws Exception {
    NodeMcpClient.install();
  }

  @Test
  void servesTheCoderToolsInAHostWorkspaceCreatedOnTheFirstCall() throws Exception {
    Path home = temp.resolve("home");
    Path stderr = temp.resolve("stderr.log");
    JsonNode result = runClient(home, stderr, "mcp", "--provider", "host");
    assertListsAndCalls(result);

    WorkspaceRef ref = createdRef(stderr).orElseThrow();
    assertThat(ref.provider()).isEqualTo("host");
    assertThat(Files.readString(home.resolve("host", ref.id(), "hello.txt")))
        .isEqualTo("hello from mcp\n");
  }

  @Test
  void servesTheCoderToolsInTheSandboxNamedByRef() throws Exception {
    Path home = temp.resolve("home");
    HostWorkspaceProvider host = HostWorkspaceProvider.create(home.resolve("host"));
    WorkspaceRef existing = Workspace.of(host.newBackend()).open();
    Path stderr = temp.resolve("stderr.log");

    assertListsAndCalls(runClient(home, stderr, "mcp", "--sandbox", existing.toString()));

    assertThat(Files.readString(home.resolve("host", existing.id(), "hello.txt")))
        .isEqualTo("hello from mcp\n");
    assertThat(createdRef(stderr)).isEmpty();
    assertThat(host.list()).containsExactly(existing);
  }

  @Test
  void servesTheCoderToolsInALocalSandboxCreatedOnTheFirstCall() throws Exception {
    NodeMcpClient.requireLocalEngine();
    NodeMcpClient.warmUpLocalEngine();
    LocalSandbox sandboxes = new LocalSandbox();
    Path stderr = temp.resolve("stderr.log");
    Optional<WorkspaceRef> created = Optional.empty();
    try {
      JsonNode result = runClient(sandboxes.home(), stderr, "mcp");
      created = createdRef(stderr);
      assertListsAndCalls(result);
      assertThat(created).get().extracting(WorkspaceRef::provider).isEqualTo("local");
      // it keeps running after the client left, as the command says
      assertThat(Workspace.of(sandboxes.backend(created.get()).orElseThrow()).readText("hello.txt"))
          .isEqualTo("hello from mcp\n");
    } finally {
      created.ifPresent(sandboxes::destroy);
    }
  }

  /**
   * Runs the client against {@code sandbox4j ARGS} in a child JVM with {@code SANDBOX4J_HOME}
   * {@code home} (through {@code env}: the SDK passes only a few variables to the server).
   */
  private static JsonNode runClient(Path home, Path stderr, String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("env", "SANDBOX4J_HOME=" + home));
    command.addAll(NodeMcpClient.javaCommand(Main.class.getName(), List.of(args)));
    return NodeMcpClient.run(command, Map.of(), stderr);
  }

  /** The ref the command named on stderr as created, if it did. */
  private static Optional<WorkspaceRef> createdRef(Path stderr) throws Exception {
    Matcher m = CREATED.matcher(Files.readString(stderr));
    if (!m.find()) {
      return Optional.empty();
    }
    return Optional.of(WorkspaceRef.parse(m.group(1)));
  }
}
