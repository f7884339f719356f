package com.example.remote;

import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.mcp.McpToolServer;
import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerKeys;
import dev.sandbox4j.server.Tenant;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Starts a Sandbox4j server in this JVM (what {@code sandbox4j serve} runs), makes an API key, and
 * uses a sandbox through the server with {@link RemoteSandbox}: the same Workspace API as a local
 * one.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws IOException {
    System.out.println(run(Files.createTempDirectory("sandbox4j-server")));
  }

  /**
   * What a command printed in a sandbox of the server's, how the server listed it, and what a shell
   * tool call through the MCP endpoint of this example printed.
   */
  static String run(Path dataDir) {
    // [server]
    String key;
    try (ServerKeys keys = ServerKeys.open(dataDir)) {
      key = keys.create("acme").key(); // shown once; the server keeps a hash
    }
    try (SandboxServer server =
        SandboxServer.builder()
            .engine(new LocalSandbox()) // its home: $SANDBOX4J_HOME unless set
            .dataDirectory(dataDir)
            .bind("127.0.0.1", 0) // 0: any free port
            .maxSandboxesPerOrganization(20)
            .servlet(
                "/mcp/*", // instead of the server's own MCP endpoint, which works like this one
                McpToolServer.streamableHttp(
                    request -> {
                      Tenant tenant = Tenant.of(request);
                      String id = request.getParameter("sandbox");
                      return id == null
                          ? tenant.create(Map.of("via", "mcp"))
                          : tenant
                              .sandbox(id)
                              .orElseThrow(() -> new WorkspaceUnavailableException("no " + id));
                    },
                    Coder.builder().repoContext(false).build().tools()))
            .build()
            .start()) {
      URI uri = server.uri();
      // clients send "Authorization: Bearer " + key
      return useThroughTheServer(uri, key) + "\n" + callTheMcpEndpoint(uri, key);
    }
    // [/server]
  }

  private static String useThroughTheServer(URI uri, String key) {
    // [remote-sandbox]
    RemoteSandbox sandboxes =
        RemoteSandbox.builder() // or RemoteSandbox.fromEnvironment()
            .url(uri) // else $SANDBOX4J_URL
            .apiKey(key) // else $SANDBOX4J_API_KEY
            .cpus(2)
            .memory(2L << 30)
            .label("task", "demo") // like LocalSandbox's builder
            .env("PYTHONUNBUFFERED", "1")
            .build();
    Workspace ws = Workspace.of(sandboxes.newBackend()); // created on first use
    CommandResult r = ws.run(Command.shell("echo hello from $(hostname)"));
    ws.run(Command.argv("python3", "-V"));
    List<SandboxInfo> mine = sandboxes.list(Map.of("task", "demo"), "running"); // by labels, state
    sandboxes.info(ws.open()); // Optional<SandboxInfo>: empty once gone
    sandboxes.suspend(ws.open()); // also resume, stop, start, hibernate
    ForkResult copy = sandboxes.forkFiles(ws.open()); // fork(ref) copies processes where it can
    sandboxes.snapshot(ws.open(), "base"); // then builder().snapshot("base")
    sandboxes.destroy(ws.open()); // idempotent
    // [/remote-sandbox]
    WorkspaceRef ref = ws.open();
    sandboxes.destroy(copy.ref());
    sandboxes.removeSnapshot("base");
    return r.stdoutText().strip().replaceAll("from .*", "from a sandbox")
        + "\nlisted: "
        + mine.stream().map(SandboxInfo::ref).toList().contains(ref)
        + "\ngone: "
        + sandboxes.info(ref).isEmpty();
  }

  /**
   * Calls the shell tool of the MCP endpoint mounted above, with the API key, as any MCP client
   * would: the endpoint creates a sandbox of the key's organization, labelled {@code via=mcp},
   * which keeps running after the session (as every sandbox of the API) and is destroyed here.
   */
  private static String callTheMcpEndpoint(URI uri, String key) {
    String printed;
    try (McpSyncClient client =
        McpClient.sync(
                HttpClientStreamableHttpTransport.builder(uri.toString())
                    .endpoint("/mcp")
                    .requestBuilder(
                        HttpRequest.newBuilder().header("Authorization", "Bearer " + key))
                    .build())
            .build()) {
      client.initialize();
      CallToolResult result =
          client.callTool(new CallToolRequest("shell", Map.of("command", "echo hello via MCP")));
      printed =
          result.content().stream()
              .map(c -> c instanceof TextContent t ? t.text() : "")
              .collect(Collectors.joining())
              .replaceFirst("^\\[stdout\\]\n", "") // the shell tool's section header
              .strip();
    }
    RemoteSandbox sandboxes = RemoteSandbox.builder().url(uri).apiKey(key).build();
    List<SandboxInfo> viaMcp = sandboxes.list(Map.of("via", "mcp"), null);
    viaMcp.forEach(info -> sandboxes.destroy(info.ref()));
    return "mcp: " + printed + " (" + viaMcp.size() + " sandbox labelled via=mcp)";
  }
}
