package dev.sandbox4j.mcp;

import static dev.sandbox4j.mcp.NodeMcpClient.assertListsAndCalls;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.agent.tools.Coder;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import io.modelcontextprotocol.client.McpClient;
import io.modelcontextprotocol.client.McpSyncClient;
import io.modelcontextprotocol.client.transport.HttpClientStreamableHttpTransport;
import io.modelcontextprotocol.spec.McpSchema.CallToolRequest;
import io.modelcontextprotocol.spec.McpSchema.CallToolResult;
import io.modelcontextprotocol.spec.McpSchema.TextContent;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.Principal;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The streamable-HTTP endpoint mounted in a real Jetty on loopback, driven by clients we did not
 * write: the official TypeScript SDK's {@code StreamableHTTPClientTransport} and the official Java
 * SDK's client.
 */
class StreamableHttpTest {

  @BeforeAll
  static void installClient() throws Exception {
    NodeMcpClient.install();
  }

  @Test
  void eachSessionGetsItsOwnHostWorkspaceClosedWhenTheClientDeletesTheSession(@TempDir Path root)
      throws Exception {
    Recording workspaces =
        new Recording(SessionWorkspaces.newPerSession(HostWorkspaceProvider.create(root)));
    try (Endpoint endpoint = Endpoint.start(coder(workspaces))) {
      JsonNode first = runClient(endpoint, root);
      JsonNode second = runClient(endpoint, root);
      assertListsAndCalls(first);
      assertListsAndCalls(second);
      assertThat(first.path("sessionId").asText()).isNotEqualTo(second.path("sessionId").asText());

      // two sessions, two workspaces, each written once, each closed by the client's DELETE
      try (var dirs = Files.list(root)) {
        List<Path> all = dirs.filter(Files::isDirectory).toList();
        assertThat(all).hasSize(2);
        for (Path dir : all) {
          assertThat(Files.readString(dir.resolve("hello.txt"))).isEqualTo("hello from mcp\n");
        }
      }
      assertThat(workspaces.opened).hasSize(2).doesNotHaveDuplicates();
      assertThat(workspaces.closed).containsExactlyInAnyOrderElementsOf(workspaces.opened);
      // the default leaves a closed workspace in place
      assertThat(root.resolve(workspaces.opened.getFirst().ref().orElseThrow().id())).isDirectory();

      // a deleted session is gone: a client still naming it gets a 404
      HttpResponse<String> late = postToolCall(endpoint.uri, first.path("sessionId").asText());
      assertThat(late.statusCode()).isEqualTo(404);
      assertThat(workspaces.opened).hasSize(2);
    }
  }

  @Test
  void eachSessionGetsALocalSandboxCreatedOnItsFirstCallAndDestroyedWithIt(@TempDir Path logs)
      throws Exception {
    NodeMcpClient.requireLocalEngine();
    NodeMcpClient.warmUpLocalEngine();
    LocalSandbox sandboxes = new LocalSandbox();
    List<WorkspaceRef> destroyed = new CopyOnWriteArrayList<>();
    // a policy of the caller's: what was created for a session goes with it
    SessionWorkspaces destroyWithSession =
        new SessionWorkspaces() {
          @Override
          public Workspace open(HttpServletRequest firstCall) {
            return Workspace.of(sandboxes.newBackend());
          }

          @Override
          public void close(Workspace workspace) {
            workspace
                .ref()
                .ifPresent(
                    ref -> {
                      sandboxes.destroy(ref);
                      destroyed.add(ref);
                    });
          }
        };
    try (Endpoint endpoint = Endpoint.start(coder(destroyWithSession))) {
      assertListsAndCalls(runClient(endpoint, logs));
      // destroyed by the client's DELETE, before the server stops
      assertThat(destroyed).hasSize(1);
      assertThat(sandboxes.list()).extracting(SandboxInfo::ref).doesNotContain(destroyed.get(0));
    }
    assertThat(destroyed).hasSize(1);
  }

  @Test
  void aSharedWorkspaceServesEverySessionAndOutlivesThem(@TempDir Path root) throws Exception {
    Workspace shared = Workspace.of(HostWorkspaceProvider.create(root).newBackend());
    try (Endpoint endpoint = Endpoint.start(coder(SessionWorkspaces.shared(shared)))) {
      try (McpSyncClient a = javaClient(endpoint);
          McpSyncClient b = javaClient(endpoint)) {
        call(a, "write_file", Map.of("path", "note.txt", "content", "from a"));
        assertThat(text(call(b, "read_file", Map.of("path", "note.txt")))).contains("from a");
      }
    }
    assertThat(shared.readText("note.txt")).isEqualTo("from a");
  }

  @Test
  void destroyingTheServletLeavesNoThreadThatKeepsTheJvmAlive(@TempDir Path root) throws Exception {
    java.util.Set<Thread> before = Thread.getAllStackTraces().keySet();
    Workspace shared = Workspace.of(HostWorkspaceProvider.create(root).newBackend());
    HttpServlet servlet = coder(SessionWorkspaces.shared(shared));
    List<Thread> started =
        Thread.getAllStackTraces().keySet().stream()
            .filter(t -> !before.contains(t) && t.isAlive() && t.getName().contains("sweeper"))
            .toList();
    assertThat(started)
        .as("the session sweepers (the SDK transport's and the endpoint's)")
        .extracting(Thread::getName)
        .anyMatch(name -> name.startsWith("streamable-http-server-transport-session-sweeper"))
        .anyMatch(name -> name.startsWith("sandbox4j-mcp-session-sweeper"));
    assertThat(started)
        .as("the servlet's threads never keep a JVM from exiting")
        .allMatch(Thread::isDaemon);
    servlet.destroy();
    for (Thread t : started) {
      t.join(Duration.ofSeconds(10));
      assertThat(t.isAlive()).as("%s ends with the servlet", t.getName()).isFalse();
    }
  }

  @Test
  void aRefusedOpenIsAnErrorResultAndTheNextCallAsksAgain(@TempDir Path root) throws Exception {
    HostWorkspaceProvider host = HostWorkspaceProvider.create(root);
    List<String> asked = new CopyOnWriteArrayList<>();
    SessionWorkspaces refusingOnce =
        request -> {
          asked.add(request.getParameter("who"));
          if (asked.size() == 1) {
            throw new IllegalStateException("quota of 0 sandboxes reached");
          }
          return Workspace.of(host.newBackend());
        };
    try (Endpoint endpoint = Endpoint.start(coder(refusingOnce));
        McpSyncClient client = javaClient(endpoint, "?who=tester")) {
      CallToolResult refused = call(client, "shell", Map.of("command", "echo hi"));
      assertThat(refused.isError()).isTrue();
      assertThat(text(refused)).contains("quota of 0 sandboxes reached");

      CallToolResult served = call(client, "shell", Map.of("command", "echo hi"));
      assertThat(served.isError()).isFalse();
      assertThat(text(served)).contains("hi");
    }
    // the request the endpoint passed is the call's own: its URL parameters are there
    assertThat(asked).containsExactly("tester", "tester");
  }

  /**
   * A message that names a key twice is refused whole: the second value must not silently win over
   * what a proxy or an audit log in front of the endpoint read as the first.
   */
  @Test
  void aMessageWithADuplicateKeyIsRefusedAndRunsNothing(@TempDir Path root) throws Exception {
    HostWorkspaceProvider host = HostWorkspaceProvider.create(root);
    Workspace shared = Workspace.of(host.newBackend());
    try (Endpoint endpoint = Endpoint.start(coder(SessionWorkspaces.shared(shared)))) {
      String id = initialize(endpoint.uri);
      HttpResponse<String> smuggled =
          post(
              endpoint.uri,
              id,
              """
              {"jsonrpc":"2.0","id":8,"method":"tools/call",\
              "params":{"name":"shell","arguments":{"command":"echo harmless",\
              "command":"touch smuggled"}}}""");
      assertThat(smuggled.statusCode()).as(smuggled.body()).isEqualTo(400);
      assertThat(shared.exists("smuggled")).isFalse();
      // the session is still usable
      assertThat(postToolCall(endpoint.uri, id).statusCode()).isEqualTo(200);
    }
  }

  @Test
  void destroyingTheServletEndsEverySessionOnce(@TempDir Path root) throws Exception {
    Recording workspaces =
        new Recording(SessionWorkspaces.newPerSession(HostWorkspaceProvider.create(root)));
    McpSyncClient busy;
    McpSyncClient idle;
    try (Endpoint endpoint = Endpoint.start(coder(workspaces))) {
      busy = javaClient(endpoint);
      idle = javaClient(endpoint); // opens a session, never calls a tool: nothing to close
      call(busy, "shell", Map.of("command", "true"));
      call(busy, "write_file", Map.of("path", "a.txt", "content", "a"));
      assertThat(workspaces.opened).hasSize(1);
      assertThat(workspaces.closed).isEmpty();
    }
    assertThat(workspaces.closed).containsExactlyElementsOf(workspaces.opened);
    busy.close();
    idle.close();
  }

  @Test
  void aSessionLeftIdleEndsAndItsWorkspaceIsClosedButOneWithAnOpenStreamLives(@TempDir Path root)
      throws Exception {
    Recording workspaces =
        new Recording(SessionWorkspaces.newPerSession(HostWorkspaceProvider.create(root)));
    HttpServlet servlet =
        StreamableHttpEndpoint.create(
            workspaces, Coder.builder().repoContext(false).build().tools(), Duration.ofMillis(200));
    try (Endpoint endpoint = Endpoint.start(servlet);
        // the Java SDK's client keeps an event stream open (GET) while it lives
        McpSyncClient listening = javaClient(endpoint)) {
      call(listening, "shell", Map.of("command", "true"));
      // a session by hand: initialize, one call, then nothing, no stream
      String idle = initialize(endpoint.uri);
      assertThat(postToolCall(endpoint.uri, idle).statusCode()).isEqualTo(200);
      assertThat(workspaces.sessionIds).hasSize(2).contains(idle);
      Workspace idleWorkspace = workspaces.opened.get(workspaces.sessionIds.indexOf(idle));

      for (int i = 0; i < 600 && workspaces.closed.isEmpty(); i++) {
        Thread.sleep(50); // a sweep or two
      }
      assertThat(workspaces.closed).containsExactly(idleWorkspace);
      assertThat(postToolCall(endpoint.uri, idle).statusCode()).isEqualTo(404);
      // the listening session outlived those sweeps and still works in its own workspace
      assertThat(call(listening, "shell", Map.of("command", "echo alive")).isError()).isFalse();
      assertThat(workspaces.opened).hasSize(2);
      assertThat(workspaces.closed).hasSize(1);
    }
  }

  @Test
  void aSessionBelongsToThePrincipalThatOpenedIt(@TempDir Path root) throws Exception {
    Recording workspaces =
        new Recording(SessionWorkspaces.newPerSession(HostWorkspaceProvider.create(root)));
    try (Endpoint endpoint = Endpoint.start(coder(workspaces));
        McpSyncClient alice =
            McpClient.sync(
                    HttpClientStreamableHttpTransport.builder(endpoint.base.toString())
                        .endpoint("/mcp")
                        .requestBuilder(HttpRequest.newBuilder().header(USER, "alice"))
                        .build())
                .build()) {
      alice.initialize();
      call(alice, "write_file", Map.of("path", "mine.txt", "content", "alice's"));
      String session = workspaces.sessionIds.getFirst();

      // bob, authenticated, naming alice's session: as unknown as a session that never was
      for (String method : List.of("POST", "DELETE")) {
        HttpResponse<String> bob =
            send(method, endpoint.uri, session, "bob", method.equals("POST") ? TOOL_CALL : null);
        assertThat(bob.statusCode()).as(method).isEqualTo(404);
      }
      HttpResponse<String> anonymous = send("POST", endpoint.uri, session, null, TOOL_CALL);
      assertThat(anonymous.statusCode()).isEqualTo(404);

      // alice's session is untouched
      assertThat(workspaces.closed).isEmpty();
      assertThat(text(call(alice, "read_file", Map.of("path", "mine.txt")))).contains("alice's");
      assertThat(workspaces.opened).hasSize(1);
    }
  }

  private static HttpServlet coder(SessionWorkspaces workspaces) {
    return McpToolServer.streamableHttp(
        workspaces, Coder.builder().repoContext(false).build().tools());
  }

  private static JsonNode runClient(Endpoint endpoint, Path logs) throws Exception {
    return NodeMcpClient.run(
        List.of(endpoint.uri.toString()),
        Map.of(),
        logs.resolveSibling(logs.getFileName() + "-client-stderr.log"));
  }

  private static McpSyncClient javaClient(Endpoint endpoint) {
    return javaClient(endpoint, "");
  }

  private static McpSyncClient javaClient(Endpoint endpoint, String query) {
    McpSyncClient client =
        McpClient.sync(
                HttpClientStreamableHttpTransport.builder(endpoint.base.toString())
                    .endpoint("/mcp" + query)
                    .build())
            .build();
    client.initialize();
    return client;
  }

  private static CallToolResult call(McpSyncClient client, String tool, Map<String, Object> args) {
    return client.callTool(new CallToolRequest(tool, args));
  }

  private static String text(CallToolResult result) {
    return result.content().stream()
        .map(c -> c instanceof TextContent t ? t.text() : "")
        .collect(Collectors.joining());
  }

  private static final String TOOL_CALL =
      """
      {"jsonrpc":"2.0","id":7,"method":"tools/call",\
      "params":{"name":"shell","arguments":{"command":"echo late"}}}""";

  /** A {@code tools/call} POSTed by hand, naming session {@code id}. */
  private static HttpResponse<String> postToolCall(URI uri, String id) throws Exception {
    return post(uri, id, TOOL_CALL);
  }

  /** A session opened by hand (initialize, initialized); its id. */
  private static String initialize(URI uri) throws Exception {
    HttpResponse<String> init =
        post(
            uri,
            null,
            """
            {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":\
            "2025-06-18","capabilities":{},"clientInfo":{"name":"by-hand","version":"1"}}}""");
    assertThat(init.statusCode()).as(init.body()).isEqualTo(200);
    String id = init.headers().firstValue("Mcp-Session-Id").orElseThrow();
    HttpResponse<String> initialized =
        post(uri, id, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    assertThat(initialized.statusCode()).isEqualTo(202);
    return id;
  }

  private static HttpResponse<String> post(URI uri, String id, String body) throws Exception {
    return send("POST", uri, id, null, body);
  }

  /** A request by hand, naming session {@code id} (if not null) as {@code user} (if not null). */
  private static HttpResponse<String> send(
      String method, URI uri, String id, String user, String body) throws Exception {
    try (HttpClient http = HttpClient.newHttpClient()) {
      HttpRequest.Builder request =
          HttpRequest.newBuilder(uri)
              .header("Content-Type", "application/json")
              .header("Accept", "application/json, text/event-stream")
              .method(
                  method,
                  body == null
                      ? HttpRequest.BodyPublishers.noBody()
                      : HttpRequest.BodyPublishers.ofString(body));
      if (id != null) {
        request.header("Mcp-Session-Id", id);
      }
      if (user != null) {
        request.header(USER, user);
      }
      return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
    }
  }

  /** Records what it opens and closes, delegating to another policy. */
  private static final class Recording implements SessionWorkspaces {
    final SessionWorkspaces delegate;
    final List<Workspace> opened = new CopyOnWriteArrayList<>();
    final List<Workspace> closed = new CopyOnWriteArrayList<>();
    final List<String> sessionIds = new CopyOnWriteArrayList<>();

    Recording(SessionWorkspaces delegate) {
      this.delegate = delegate;
    }

    @Override
    public Workspace open(HttpServletRequest firstCall) {
      Workspace workspace = delegate.open(firstCall);
      opened.add(workspace);
      sessionIds.add(firstCall.getHeader("Mcp-Session-Id"));
      return workspace;
    }

    @Override
    public void close(Workspace workspace) {
      closed.add(workspace);
      delegate.close(workspace);
    }
  }

  /** The header {@link TestAuthentication} trusts. */
  private static final String USER = "X-Test-User";

  /** Stands for real authentication: the {@code X-Test-User} header, if any, is the principal. */
  private static final class TestAuthentication extends HttpFilter {
    @Override
    protected void doFilter(
        HttpServletRequest request, HttpServletResponse response, FilterChain chain)
        throws IOException, ServletException {
      String user = request.getHeader(USER);
      if (user == null) {
        chain.doFilter(request, response);
        return;
      }
      Principal principal = () -> user;
      chain.doFilter(
          new HttpServletRequestWrapper(request) {
            @Override
            public Principal getUserPrincipal() {
              return principal;
            }
          },
          response);
    }
  }

  /** A Jetty on loopback, any free port, with the servlet at {@code /mcp}. */
  private record Endpoint(Server server, URI base, URI uri) implements AutoCloseable {
    static Endpoint start(HttpServlet servlet) throws Exception {
      Server server = new Server();
      ServerConnector connector = new ServerConnector(server);
      connector.setHost("127.0.0.1");
      connector.setPort(0);
      server.addConnector(connector);
      ServletContextHandler context = new ServletContextHandler();
      ServletHolder holder = new ServletHolder(servlet);
      holder.setAsyncSupported(true);
      context.addServlet(holder, "/mcp");
      FilterHolder authentication = new FilterHolder(new TestAuthentication());
      authentication.setAsyncSupported(true);
      context.addFilter(authentication, "/mcp", EnumSet.of(DispatcherType.REQUEST));
      server.setHandler(context);
      server.start();
      URI base = URI.create("http://127.0.0.1:" + connector.getLocalPort());
      return new Endpoint(server, base, base.resolve("/mcp"));
    }

    @Override
    public void close() throws Exception {
      server.stop();
    }
  }
}
