package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.eclipse.jetty.websocket.api.Callback;
import org.eclipse.jetty.websocket.api.Session;
import org.eclipse.jetty.websocket.api.StatusCode;

/**
 * Holds the WebSocket endpoints. Jetty invokes an endpoint's methods through a public method-handle
 * lookup, so the endpoint class must be public; nested in this package-private class it stays out
 * of the module's API.
 */
final class WebSocketEndpoints {

  private WebSocketEndpoints() {}

  /**
   * One exec over a WebSocket (docs/server-api.md): the first text frame is the ExecRequest, then
   * {@code stdin}, {@code stdin_eof} and {@code cancel} frames; the server sends exec events and
   * closes after the last one. Cancel or a closed socket kills the command's tree.
   *
   * <p>State: AWAITING_REQUEST → RUNNING (a virtual thread runs the command) → CLOSED. Jetty calls
   * the {@code onWebSocket*} methods one at a time; sends are serialized on this endpoint's monitor
   * and wait for completion, so a slow client holds the command's output back instead of filling
   * memory.
   */
  public static final class ExecSocket implements Session.Listener.AutoDemanding {

    private final Workspace workspace;
    private final Metrics metrics;
    private final ActiveExecs active;
    private volatile Session session;
    private ExecRun run; // null until the request arrived
    private StdinPipe stdin; // null when the request said "stdin": false

    ExecSocket(Workspace workspace, Metrics metrics, ActiveExecs active) {
      this.workspace = workspace;
      this.metrics = metrics;
      this.active = active;
    }

    @Override
    public void onWebSocketOpen(Session session) {
      this.session = session;
    }

    @Override
    public void onWebSocketText(String text) {
      try {
        if (run == null) {
          start(Json.parse(text.getBytes(StandardCharsets.UTF_8), ExecRequest.class));
          return;
        }
        JsonNode frame = Json.MAPPER.readTree(text);
        String type = frame == null || !frame.isObject() ? null : frame.path("type").asText(null);
        switch (type == null ? "" : type) {
          case "stdin" -> {
            if (stdin == null) {
              throw ApiException.invalid("type", "stdin frames after \"stdin\": false");
            }
            JsonNode data = frame.get("data");
            if (data == null || !data.isTextual()) {
              throw ApiException.invalid("data", "a stdin frame carries base64 data");
            }
            byte[] bytes;
            try {
              bytes = Base64.getDecoder().decode(data.textValue());
            } catch (IllegalArgumentException e) {
              throw ApiException.invalid("data", "stdin data is not valid base64");
            }
            stdin.feed(bytes);
          }
          case "stdin_eof" -> {
            if (stdin != null) {
              stdin.finish();
            }
          }
          case "cancel" -> {
            // The runner's end closes the socket, once the command's tree is killed: a client
            // that waits for the close knows its processes are gone when it reports the cancel.
            run.cancel();
          }
          default ->
              throw ApiException.invalid(
                  "type", "a frame's type is stdin, stdin_eof or cancel, was " + type);
        }
      } catch (ApiException e) {
        failAndClose(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (java.io.IOException e) {
        failAndClose(ApiException.invalid(null, "malformed JSON frame: " + e.getMessage()));
      }
    }

    private void start(ExecRequest request) {
      Command command = request.command();
      RunOptions.Builder options = request.options();
      if (request.streamsStdin()) {
        stdin = new StdinPipe();
        options.stdin(stdin);
      }
      ExecRun created =
          new ExecRun(
              workspace,
              command,
              options,
              event -> {
                synchronized (this) {
                  Callback.Completable sent = new Callback.Completable();
                  session.sendText(Json.MAPPER.writeValueAsString(event), sent);
                  try {
                    sent.get();
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("send interrupted");
                  } catch (java.util.concurrent.ExecutionException e) {
                    throw new java.io.IOException("the client is gone", e.getCause());
                  }
                }
              },
              metrics);
      run = created;
      Thread.ofVirtual()
          .name("sandbox4j-exec-ws")
          .start(
              () -> {
                active.add(created);
                try {
                  created.run();
                } finally {
                  active.remove(created);
                  if (stdin != null) {
                    stdin.close();
                  }
                  close(StatusCode.NORMAL, "done");
                }
              });
    }

    private void failAndClose(ApiException e) {
      metrics.error(e.code);
      ObjectNode error = Json.object().put("code", e.code).put("message", e.getMessage());
      if (e.field != null) {
        error.put("field", e.field);
      }
      ObjectNode event = Json.object().put("type", "error");
      event.set("error", error);
      if (run != null) {
        run.cancel();
      }
      synchronized (this) {
        try {
          session.sendText(Json.MAPPER.writeValueAsString(event), Callback.NOOP);
        } catch (java.io.IOException ignored) {
          // the close below tells the client anyway
        }
      }
      close(StatusCode.POLICY_VIOLATION, e.code);
    }

    private void close(int status, String reason) {
      Session s = session;
      if (s != null && s.isOpen()) {
        s.close(status, reason, Callback.NOOP);
      }
    }

    @Override
    public void onWebSocketClose(int status, String reason, Callback callback) {
      ended();
      callback.succeed();
    }

    private void ended() {
      if (run != null) {
        run.cancel();
      }
      if (stdin != null) {
        stdin.close();
      }
    }

    @Override
    public void onWebSocketError(Throwable cause) {
      ended();
    }
  }
}
