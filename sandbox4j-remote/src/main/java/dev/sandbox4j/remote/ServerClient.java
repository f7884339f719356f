package dev.sandbox4j.remote;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.MissingNode;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.opentelemetry.context.Context;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CancellationException;

/**
 * The HTTP side of the client: authenticated requests to one server and the mapping of its JSON
 * errors to workspace exceptions. The API key goes into the {@code Authorization} header only,
 * never into a message or {@code toString}. The JDK client is built on first use, so that building
 * a provider does no I/O. Thread-safe.
 */
final class ServerClient {

  static final ObjectMapper JSON = new ObjectMapper();

  /** The longest a plain request may take; exec streams and file bodies are not bound by it. */
  private static final Duration REQUEST_TIMEOUT = Duration.ofMinutes(5);

  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

  private final URI base;
  private final String key;
  private HttpClient http;
  private final ExecConnection.Pool execConnections = new ExecConnection.Pool();
  private final SandboxTelemetry telemetry;
  private final Duration pingInterval;

  /** How long an exec stream may be silent before a ping checks its connection, by default. */
  static final Duration DEFAULT_PING_INTERVAL = Duration.ofSeconds(5);

  ServerClient(URI base, String key) {
    this(base, key, SandboxTelemetry.global(), DEFAULT_PING_INTERVAL);
  }

  ServerClient(URI base, String key, SandboxTelemetry telemetry, Duration pingInterval) {
    this.telemetry = telemetry;
    this.pingInterval = pingInterval;
    String text = base.toString();
    this.base = URI.create(text.endsWith("/") ? text.substring(0, text.length() - 1) : text);
    this.key = key;
  }

  URI base() {
    return base;
  }

  /**
   * How long an exec stream may be silent before a ping checks that its connection still lives; a
   * ping unanswered for twice as long counts the connection as lost.
   */
  Duration pingInterval() {
    return pingInterval;
  }

  synchronized HttpClient http() {
    if (http == null) {
      http =
          HttpClient.newBuilder()
              .version(HttpClient.Version.HTTP_1_1)
              .connectTimeout(CONNECT_TIMEOUT)
              .build();
    }
    return http;
  }

  /** The idle exec sockets, kept for the next command on their sandbox. */
  ExecConnection.Pool execConnections() {
    return execConnections;
  }

  String authorization() {
    return "Bearer " + key;
  }

  /** The WebSocket address of {@code path}: {@code ws} for {@code http}, {@code wss} for https. */
  URI webSocket(String path) {
    String scheme = base.getScheme().equalsIgnoreCase("https") ? "wss" : "ws";
    return URI.create(scheme + base.toString().substring(base.getScheme().length()) + path);
  }

  HttpRequest.Builder request(String path) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .header("Authorization", authorization())
            .timeout(REQUEST_TIMEOUT);
    injectTraceContext(b::header);
    return b;
  }

  /** Where this client's operations are traced, and how their context crosses to the server. */
  SandboxTelemetry telemetry() {
    return telemetry;
  }

  /**
   * Sets the current trace context's fields ({@code traceparent}, {@code tracestate} with the W3C
   * propagator) through {@code header}, with the propagators the OpenTelemetry in force has: none
   * without an SDK, so no header either.
   */
  void injectTraceContext(java.util.function.BiConsumer<String, String> header) {
    telemetry
        .openTelemetry()
        .getPropagators()
        .getTextMapPropagator()
        .inject(Context.current(), header, (carrier, name, value) -> carrier.accept(name, value));
  }

  static String query(String value) {
    return URLEncoder.encode(value, StandardCharsets.UTF_8);
  }

  /** Sends a JSON request (null body: none) and returns the answer's JSON (missing for 204). */
  JsonNode call(String method, String path, JsonNode body, Target target) {
    HttpRequest.BodyPublisher publisher =
        body == null
            ? HttpRequest.BodyPublishers.noBody()
            : HttpRequest.BodyPublishers.ofString(body.toString());
    HttpRequest.Builder b = request(path).method(method, publisher);
    if (body != null) {
      b.header("Content-Type", "application/json");
    }
    HttpResponse<byte[]> response = send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    if (response.statusCode() / 100 != 2) {
      throw error(response.statusCode(), response.body(), target, retryAfter(response));
    }
    byte[] bytes = response.body();
    if (bytes == null || bytes.length == 0) {
      return MissingNode.getInstance();
    }
    try {
      return JSON.readTree(bytes);
    } catch (IOException e) {
      throw new WorkspaceException(
          "the sandbox4j server at " + base + " answered " + method + " " + path + " with bad JSON",
          e);
    }
  }

  /** Sends a DELETE; true if it deleted something, false for a 404 (nothing there). */
  boolean delete(String path) {
    HttpResponse<byte[]> response =
        send(request(path).DELETE().build(), HttpResponse.BodyHandlers.ofByteArray());
    if (response.statusCode() == 404) {
      return false;
    }
    if (response.statusCode() / 100 != 2) {
      throw error(response.statusCode(), response.body(), Target.NONE, retryAfter(response));
    }
    return true;
  }

  /** Sends a request whose answer is streamed (a file's content). */
  InputStream stream(HttpRequest request, Target target) {
    HttpResponse<InputStream> response = send(request, HttpResponse.BodyHandlers.ofInputStream());
    if (response.statusCode() / 100 != 2) {
      byte[] body;
      try (InputStream in = response.body()) {
        body = in.readNBytes(64 * 1024);
      } catch (IOException e) {
        body = new byte[0];
      }
      throw error(response.statusCode(), body, target, retryAfter(response));
    }
    return response.body();
  }

  <T> HttpResponse<T> send(HttpRequest request, HttpResponse.BodyHandler<T> handler) {
    try {
      return http().send(request, handler);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CancellationException(
          "interrupted while waiting for the sandbox4j server at " + base);
    } catch (IOException e) {
      throw unreachable(e);
    }
  }

  WorkspaceException unreachable(Throwable e) {
    return new WorkspaceException(
        "cannot reach the sandbox4j server at " + base + ": " + describe(e), e);
  }

  static String describe(Throwable e) {
    String message = e.getMessage();
    return message == null || message.isBlank()
        ? e.getClass().getSimpleName()
        : e.getClass().getSimpleName() + ": " + message;
  }

  private static String retryAfter(HttpResponse<?> response) {
    return response.headers().firstValue("Retry-After").orElse(null);
  }

  /**
   * What a request was about, so that an error names it: the sandbox (a 404 {@code not_found} means
   * it is gone) and the file path (file errors are about it).
   *
   * @param sandbox the sandbox id, or null
   * @param path the path inside the sandbox, or null
   */
  record Target(String sandbox, String path) {
    static final Target NONE = new Target(null, null);

    static Target sandbox(String id) {
      return new Target(id, null);
    }

    static Target file(String id, String path) {
      return new Target(id, path);
    }
  }

  /** The exception for an error answer: {@code {"error": {"code", "message", "field", "path"}}}. */
  RuntimeException error(int status, byte[] body, Target target, String retryAfter) {
    JsonNode error = MissingNode.getInstance();
    if (body != null && body.length > 0) {
      try {
        error = JSON.readTree(body).path("error");
      } catch (IOException notJson) {
        // not the server's JSON (a proxy's page?): described by status below
      }
    }
    return error(status, error, target, retryAfter);
  }

  RuntimeException error(int status, JsonNode error, Target target, String retryAfter) {
    String code = text(error, "code");
    String message = text(error, "message");
    if (code == null) {
      code =
          switch (status) {
            case 401 -> "unauthenticated";
            case 404 -> "not_found";
            case 503 -> "unavailable";
            default -> "http_" + status;
          };
    }
    if (message == null) {
      message = "HTTP status " + status;
    }
    String path = text(error, "path");
    if (path == null) {
      path = target.path();
    }
    String field = text(error, "field");
    if (path != null && message.startsWith(path + ": ")) {
      message = message.substring(path.length() + 2); // the exception puts the path back
    }
    return switch (code) {
      case "not_found" ->
          field != null
              ? rejected(field, message) // something the request names, such as its snapshot
              : target.sandbox() != null
                  ? gone(target.sandbox(), message)
                  : new WorkspaceException("not found on the server: " + message);
      case "file_error" -> new WorkspaceFileException(orUnknown(path), message);
      case "unavailable" ->
          new WorkspaceUnavailableException(
              (target.sandbox() == null ? "" : "sandbox " + ref(target.sandbox()) + " ")
                  + "is unavailable: "
                  + message);
      case "no_such_file" -> new WorkspaceNoSuchFileException(orUnknown(path), message);
      case "is_directory" -> new WorkspaceIsDirectoryException(orUnknown(path), message);
      case "not_directory" -> new WorkspaceNotDirectoryException(orUnknown(path), message);
      case "already_exists" -> new WorkspaceFileAlreadyExistsException(orUnknown(path), message);
      case "directory_not_empty" ->
          new WorkspaceDirectoryNotEmptyException(orUnknown(path), message);
      case "access_denied" -> new WorkspaceAccessDeniedException(orUnknown(path), message);
      case "unauthenticated" ->
          new WorkspaceException(
              "the sandbox4j server at " + base + " refused the API key (401): " + message);
      case "quota_exceeded", "rate_limited" ->
          new WorkspaceException(
              "the sandbox4j server at "
                  + base
                  + " refused: "
                  + code
                  + ": "
                  + message
                  + (retryAfter == null ? "" : " (retry after " + retryAfter + " s)"));
      case "invalid_request" ->
          text(error, "path") != null
              ? new WorkspaceFileException(path, message)
              : rejected(field, message);
      // the server's provider cannot do it (a server on docker: hibernate, egress, timers):
      // a create field it cannot honour is refused like a bad value, a route is a failure
      case "not_supported" ->
          field != null
              ? rejected(field, message)
              : new WorkspaceException(
                  "the sandbox4j server at " + base + " cannot do this (501): " + message);
      default ->
          text(error, "path") != null
              ? new WorkspaceFileException(path, code + ": " + message)
              : new WorkspaceException(
                  "the sandbox4j server at "
                      + base
                      + " failed ("
                      + status
                      + " "
                      + code
                      + "): "
                      + message);
    };
  }

  private static IllegalArgumentException rejected(String field, String message) {
    return new IllegalArgumentException(
        "the sandbox4j server rejected the request"
            + (field == null ? "" : " (field '" + field + "')")
            + ": "
            + message);
  }

  static WorkspaceUnavailableException gone(String sandbox, String why) {
    return new WorkspaceUnavailableException(
        "sandbox " + ref(sandbox) + " is gone (the server does not know it: " + why + ")");
  }

  private static String ref(String id) {
    return RemoteSandbox.NAME + ":" + id;
  }

  private static String orUnknown(String path) {
    return path == null ? "(unknown path)" : path;
  }

  static String text(JsonNode node, String field) {
    JsonNode value = node.path(field);
    return value.isTextual() ? value.asText() : null;
  }

  static String write(Object value) {
    try {
      return JSON.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String toString() {
    return "ServerClient[" + base + "]";
  }
}
