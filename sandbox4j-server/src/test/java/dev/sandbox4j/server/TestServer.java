package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A server on loopback over a fresh data directory and the test engine, with a small client. Public
 * in the test-jar for the CLI's tests of the server on the CLI's own engines ({@code
 * DockerServerTest}).
 */
public final class TestServer implements AutoCloseable {

  static final ObjectMapper JSON = new ObjectMapper();
  final Path data;

  /** The local engine; null for a server on another provider ({@link #serverEngine}). */
  final LocalSandbox engine;

  final ServerEngine serverEngine;
  final List<String> logLines = new CopyOnWriteArrayList<>();
  final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  SandboxServer server;
  private final List<String> created = new ArrayList<>();

  TestServer(Path data, java.util.function.UnaryOperator<SandboxServer.Builder> options) {
    this(data, LocalSandbox.builder().build(), options);
  }

  TestServer(
      Path data,
      LocalSandbox engine,
      java.util.function.UnaryOperator<SandboxServer.Builder> options) {
    this(data, ServerEngine.local(engine), options);
  }

  /** A server on {@code serverEngine}, whose sandboxes {@link #close} destroys by its provider. */
  public TestServer(
      Path data,
      ServerEngine serverEngine,
      java.util.function.UnaryOperator<SandboxServer.Builder> options) {
    this.data = data;
    this.serverEngine = serverEngine;
    this.engine = serverEngine.provider() instanceof LocalSandbox local ? local : null;
    this.server =
        options
            .apply(
                SandboxServer.builder()
                    .engine(serverEngine)
                    .dataDirectory(data)
                    .requestLog(logLines::add))
            .build()
            .start();
  }

  TestServer(Path data) {
    this(data, b -> b);
  }

  /** Root on Linux with a crun; skips without, except under CI=true. */
  static void requireLocalEngine() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun"))
            || Files.isExecutable(Path.of("/usr/bin/crun")),
        "crun (sandbox4j setup)");
  }

  public String key(String org) {
    try (ServerKeys keys = ServerKeys.open(data)) {
      return keys.create(org).key();
    }
  }

  URI uri(String path) {
    return URI.create(server.uri() + path);
  }

  public HttpResponse<byte[]> send(String key, String method, String path, byte[] body, String type)
      throws IOException, InterruptedException {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(uri(path))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofByteArray(body));
    if (key != null) {
      b.header("Authorization", "Bearer " + key);
    }
    if (type != null) {
      b.header("Content-Type", type);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  public Answer call(String key, String method, String path, String json)
      throws IOException, InterruptedException {
    HttpResponse<byte[]> r =
        send(
            key,
            method,
            path,
            json == null ? null : json.getBytes(StandardCharsets.UTF_8),
            json == null ? null : "application/json");
    return new Answer(r.statusCode(), r.body(), r.headers().map());
  }

  /** Creates a sandbox, remembered for {@link #close}, and returns its id. */
  public String create(String key, String json) throws IOException, InterruptedException {
    Answer a = call(key, "POST", "/v1/sandboxes", json);
    assertThat(a.status()).as(a.text()).isEqualTo(201);
    String id = a.json().get("id").asText();
    created.add(id);
    return id;
  }

  /** Destroys {@code id} on {@link #close} (a sandbox made by a fork). */
  public void track(String id) {
    created.add(id);
  }

  /** The NDJSON events of a POST exec. */
  public List<JsonNode> exec(String key, String id, String json)
      throws IOException, InterruptedException {
    Answer a = call(key, "POST", "/v1/sandboxes/" + id + "/exec", json);
    assertThat(a.status()).as(a.text()).isEqualTo(200);
    List<JsonNode> events = new ArrayList<>();
    for (String line : a.text().split("\n")) {
      if (!line.isEmpty()) {
        events.add(JSON.readTree(line));
      }
    }
    return events;
  }

  public static String stdout(List<JsonNode> events, String type) {
    StringBuilder s = new StringBuilder();
    for (JsonNode e : events) {
      if (e.get("type").asText().equals(type)) {
        s.append(
            new String(Base64.getDecoder().decode(e.get("data").asText()), StandardCharsets.UTF_8));
      }
    }
    return s.toString();
  }

  /** The method and path template of every route the API serves. */
  public List<String> routes() {
    return server.routes();
  }

  /** Restarts the server on the same data directory (a new port). */
  void restart() {
    restart(b -> b);
  }

  /** Closes the server and starts another on the same engine and data, with other options. */
  void restart(java.util.function.UnaryOperator<SandboxServer.Builder> options) {
    server.close();
    server =
        options
            .apply(
                SandboxServer.builder()
                    .engine(serverEngine)
                    .dataDirectory(data)
                    .requestLog(logLines::add))
            .build()
            .start();
  }

  @Override
  public void close() {
    server.close();
    for (String id : created) {
      try {
        serverEngine
            .provider()
            .destroy(new dev.sandbox4j.workspace.WorkspaceRef(serverEngine.provider().name(), id));
      } catch (RuntimeException e) {
        // already gone
      }
    }
  }

  /** An HTTP answer. */
  public record Answer(int status, byte[] body, Map<String, List<String>> headers) {
    public String text() {
      return new String(body, StandardCharsets.UTF_8);
    }

    public JsonNode json() throws IOException {
      return JSON.readTree(body);
    }

    /** The error object of an error answer. */
    public JsonNode error() throws IOException {
      return json().get("error");
    }
  }
}
