package dev.sandbox4j.server;

import static dev.sandbox4j.mcp.NodeMcpClient.assertListsAndCalls;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.mcp.NodeMcpClient;
import java.net.URLEncoder;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code /mcp} of a real server on loopback, driven by the official TypeScript SDK's
 * streamable-HTTP client with an API key: the Coder tools in a sandbox of the key's organization.
 */
class McpEndpointTest {

  @TempDir Path data;

  @BeforeAll
  static void prerequisites() throws Exception {
    TestServer.requireLocalEngine();
    NodeMcpClient.install();
    NodeMcpClient.warmUpLocalEngine();
  }

  @Test
  void aSessionGetsASandboxOfTheKeysOrganizationCreatedOnItsFirstCall() throws Exception {
    try (TestServer server = new TestServer(data)) {
      String key = server.key("acme");
      JsonNode result = runClient(server, "", key);
      assertListsAndCalls(result);

      List<String> made = mcpSandboxes(server, key);
      made.forEach(server::track);
      assertThat(made).hasSize(1);
      TestServer.Answer hello =
          server.call(
              key,
              "GET",
              "/v1/sandboxes/" + made.getFirst() + "/files/content?path=hello.txt",
              null);
      assertThat(hello.status()).as(hello.text()).isEqualTo(200);
      assertThat(hello.text()).isEqualTo("hello from mcp\n");
      // another organization sees none of it
      assertThat(mcpSandboxes(server, server.key("other"))).isEmpty();
    }
  }

  @Test
  void aSessionNamingASandboxActsInItAndCreatesNone() throws Exception {
    try (TestServer server = new TestServer(data)) {
      String key = server.key("acme");
      String id = server.create(key, "{}");
      assertListsAndCalls(runClient(server, "?sandbox=" + id, key));

      TestServer.Answer hello =
          server.call(key, "GET", "/v1/sandboxes/" + id + "/files/content?path=hello.txt", null);
      assertThat(hello.text()).isEqualTo("hello from mcp\n");
      assertThat(mcpSandboxes(server, key)).isEmpty();
    }
  }

  @Test
  void anotherOrganizationsSandboxIsNotFoundAndNoKeyIsUnauthorized() throws Exception {
    try (TestServer server = new TestServer(data)) {
      String acme = server.key("acme");
      String theirs = server.create(server.key("other"), "{}");

      JsonNode foreign = runClient(server, "?sandbox=" + theirs, acme);
      assertThat(foreign.path("connectStatus").asInt()).as(foreign.toString()).isEqualTo(404);
      JsonNode unknown = runClient(server, "?sandbox=nosuchsandbox", acme);
      assertThat(unknown.path("connectStatus").asInt()).as(unknown.toString()).isEqualTo(404);
      JsonNode anonymous = runClient(server, "", null);
      assertThat(anonymous.path("connectStatus").asInt()).as(anonymous.toString()).isEqualTo(401);
      JsonNode wrongKey = runClient(server, "", "s4j_" + "0".repeat(43));
      assertThat(wrongKey.path("connectStatus").asInt()).as(wrongKey.toString()).isEqualTo(401);

      assertThat(mcpSandboxes(server, acme)).isEmpty();
      TestServer.Answer raw =
          server.call(
              acme,
              "POST",
              "/mcp?sandbox=" + URLEncoder.encode(theirs, StandardCharsets.UTF_8),
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
      // the same answer as for an id that never existed: nothing says the sandbox exists
      assertThat(raw.status()).isEqualTo(404);
      assertThat(raw.json().path("error").path("code").asText()).isEqualTo("not_found");
    }
  }

  @Test
  void aSessionIsItsOrganizationsOnly() throws Exception {
    try (TestServer server = new TestServer(data)) {
      String acme = server.key("acme");
      String other = server.key("other");
      HttpResponse<String> init =
          mcp(
              server,
              acme,
              null,
              """
              {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":\
              "2025-06-18","capabilities":{},"clientInfo":{"name":"by-hand","version":"1"}}}""");
      assertThat(init.statusCode()).as(init.body()).isEqualTo(200);
      String session = init.headers().firstValue("Mcp-Session-Id").orElseThrow();
      String ping = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";

      // another organization's valid key naming acme's session: as unknown as no session at all
      assertThat(mcp(server, other, session, ping).statusCode()).isEqualTo(404);
      assertThat(mcp(server, acme, session, ping).statusCode()).isEqualTo(200);
    }
  }

  /** A JSON-RPC message POSTed to /mcp with {@code key}, naming {@code session} if not null. */
  private static HttpResponse<String> mcp(
      TestServer server, String key, String session, String body) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(server.uri("/mcp"))
            .header("Authorization", "Bearer " + key)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (session != null) {
      request.header("Mcp-Session-Id", session);
    }
    return server.http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode runClient(TestServer server, String query, String key) throws Exception {
    Map<String, String> env = key == null ? Map.of() : Map.of("MCP_API_KEY", key);
    return NodeMcpClient.run(
        List.of(server.uri("/mcp" + query).toString()),
        env,
        Path.of("target", "mcp-node-client", "server-client-stderr.log").toAbsolutePath());
  }

  /** The ids of the organization's sandboxes that /mcp created. */
  private static List<String> mcpSandboxes(TestServer server, String key) throws Exception {
    TestServer.Answer list = server.call(key, "GET", "/v1/sandboxes?label=created-by=mcp", null);
    assertThat(list.status()).as(list.text()).isEqualTo(200);
    List<String> ids = new ArrayList<>();
    list.json().path("items").forEach(s -> ids.add(s.path("id").asText()));
    return ids;
  }
}
