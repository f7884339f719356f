package dev.sandbox4j.agent.models;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * An HTTP server on 127.0.0.1 that answers each request with the next recorded response, in the
 * order they were queued, and keeps every request it received.
 *
 * <p>A recording ({@code src/test/resources/recordings/...}) is an HTTP response as it came over
 * the wire: a status line, headers, a blank line and the body. A {@code text/event-stream} body is
 * sent one event at a time, flushed, so that the SDK reads it as a stream. With no recording left,
 * the server answers 404 (which the SDKs do not retry) so that a test fails rather than hangs.
 */
final class ReplayServer implements AutoCloseable {

  private static final ObjectMapper JSON = new ObjectMapper();

  /** One request as the server received it; header names in lower case. */
  record Request(String method, String path, Map<String, String> headers, String body) {
    JsonNode json() {
      try {
        return JSON.readTree(body);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  private record Recording(int status, List<String[]> headers, byte[] body) {}

  private final HttpServer server;
  private final Deque<Recording> responses = new ArrayDeque<>();
  private final List<Request> requests = new ArrayList<>();

  private ReplayServer(HttpServer server) {
    this.server = server;
  }

  static ReplayServer start() {
    try {
      HttpServer server =
          HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
      ReplayServer replay = new ReplayServer(server);
      server.createContext("/", replay::handle);
      server.start();
      return replay;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@code http://127.0.0.1:<port>}. */
  String baseUrl() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  /** Queues the recording at {@code recordings/<path>} as the next response. */
  synchronized ReplayServer enqueue(String path) {
    responses.add(load(path));
    return this;
  }

  synchronized List<Request> requests() {
    return List.copyOf(requests);
  }

  private void handle(HttpExchange exchange) throws IOException {
    Recording recording;
    synchronized (this) {
      Map<String, String> headers = new LinkedHashMap<>();
      exchange
          .getRequestHeaders()
          .forEach((name, values) -> headers.put(name.toLowerCase(Locale.ROOT), values.getFirst()));
      String body;
      try (InputStream in = exchange.getRequestBody()) {
        body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      }
      requests.add(
          new Request(
              exchange.getRequestMethod(), exchange.getRequestURI().getPath(), headers, body));
      recording = responses.poll();
    }
    if (recording == null) {
      recording =
          new Recording(
              404,
              List.<String[]>of(new String[] {"content-type", "application/json"}),
              "{\"error\":{\"message\":\"no recorded response left\"}}"
                  .getBytes(StandardCharsets.UTF_8));
    }
    boolean eventStream = false;
    for (String[] header : recording.headers()) {
      exchange.getResponseHeaders().add(header[0], header[1]);
      eventStream |=
          header[0].equalsIgnoreCase("content-type") && header[1].startsWith("text/event-stream");
    }
    try (OutputStream out = exchange.getResponseBody()) {
      if (eventStream) {
        exchange.sendResponseHeaders(recording.status(), 0); // chunked, like the providers
        String text = new String(recording.body(), StandardCharsets.UTF_8);
        for (String event : text.split("(?<=\n\n)")) {
          out.write(event.getBytes(StandardCharsets.UTF_8));
          out.flush();
        }
      } else {
        exchange.sendResponseHeaders(recording.status(), recording.body().length);
        out.write(recording.body());
      }
    }
  }

  private static Recording load(String path) {
    String text;
    try (InputStream in = ReplayServer.class.getResourceAsStream("/recordings/" + path)) {
      if (in == null) {
        throw new IllegalArgumentException("no recording " + path);
      }
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    int headerEnd = text.indexOf("\n\n");
    String[] head = text.substring(0, headerEnd).split("\n");
    int status = Integer.parseInt(head[0].split(" ")[1]);
    List<String[]> headers = new ArrayList<>();
    for (int i = 1; i < head.length; i++) {
      int colon = head[i].indexOf(':');
      headers.add(
          new String[] {head[i].substring(0, colon).trim(), head[i].substring(colon + 1).trim()});
    }
    return new Recording(
        status, headers, text.substring(headerEnd + 2).getBytes(StandardCharsets.UTF_8));
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
