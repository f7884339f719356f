package com.example.mcp;

import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.mcp.McpToolServer;
import dev.sandbox4j.mcp.SessionWorkspaces;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import java.util.Map;
import java.util.stream.Collectors;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * Serves the Coder tools over MCP (streamable HTTP) from a Jetty in this JVM, one local sandbox per
 * MCP session, and calls them with the MCP Java SDK's client, as any MCP client would.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    System.out.println(run());
  }

  /** The tools the client listed, and what two tool calls returned. */
  static String run() throws Exception {
    // [mcp-servlet]
    LocalSandbox sandboxes = new LocalSandbox();
    HttpServlet mcp =
        McpToolServer.streamableHttp(
            new SessionWorkspaces() { // one sandbox per MCP session, destroyed when it ends
              @Override
              public Workspace open(HttpServletRequest firstCall) {
                return Workspace.of(sandboxes.newBackend());
              }

              @Override
              public void close(Workspace w) {
                w.ref().ifPresent(sandboxes::destroy);
              }
            },
            Coder.builder().repoContext(false).build().tools());
    ServletHolder holder = new ServletHolder(mcp);
    holder.setAsyncSupported(true); // required: answers are event streams
    ServletContextHandler context = new ServletContextHandler();
    context.addServlet(holder, "/mcp");
    // [/mcp-servlet]
    Server jetty = new Server();
    ServerConnector connector = new ServerConnector(jetty);
    connector.setHost("127.0.0.1"); // the servlet checks no credentials: loopback only
    connector.setPort(0);
    jetty.addConnector(connector);
    jetty.setHandler(context);
    jetty.start();
    try (McpSyncClient client =
        McpClient.sync(
                HttpClientStreamableHttpTransport.builder(
                        "http://127.0.0.1:" + connector.getLocalPort())
                    .endpoint("/mcp")
                    .build())
            .build()) {
      client.initialize();
      String tools =
          client.listTools().tools().stream()
              .map(t -> t.name())
              .sorted()
              .collect(Collectors.joining(","));
      String wrote =
          text(
              client.callTool(
                  new CallToolRequest(
                      "write_file", Map.of("path", "notes.txt", "content", "from MCP\n"))));
      String ran =
          text(client.callTool(new CallToolRequest("shell", Map.of("command", "cat notes.txt"))));
      return "tools: " + tools + "\nwrite_file: " + wrote + "\nshell: " + ran;
    } finally {
      jetty.stop(); // ends the session: close() destroys its sandbox
    }
  }

  private static String text(CallToolResult result) {
    return result.content().stream()
        .map(c -> c instanceof TextContent t ? t.text() : "")
        .collect(Collectors.joining());
  }
}
