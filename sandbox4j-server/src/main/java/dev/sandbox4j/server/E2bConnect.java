package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

/**
 * The Connect protocol over HTTP/1.1 as envd serves it (connectrpc.com/docs/protocol): a unary call
 * is a POST of one JSON message answered by one, an error a non-2xx status with {@code
 * {"code","message"}}; a server-streaming call ({@code application/connect+json}) sends and answers
 * 5-byte envelopes (flags, big-endian length), the last one flagged {@code 0x02} carrying {@code
 * {"error": ...}} or {@code {}}. Only the JSON codec: the e2b SDK's transport is created with
 * {@code useBinaryFormat: false}; a binary request is refused with {@code unimplemented}.
 */
final class E2bConnect {

  static final String UNARY_JSON = "application/json";
  static final String STREAM_JSON = "application/connect+json";
  private static final int MAX_MESSAGE = 16 << 20;

  private E2bConnect() {}

  /** A Connect error: one of the protocol's codes and a message. */
  static final class RpcException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final String code;

    RpcException(String code, String message) {
      super(message);
      this.code = code;
    }
  }

  static RpcException notFound(String message) {
    return new RpcException("not_found", message);
  }

  static RpcException invalid(String message) {
    return new RpcException("invalid_argument", message);
  }

  /** The HTTP status of a Connect error code, from the protocol's table. */
  static int status(String code) {
    return switch (code) {
      case "canceled" -> 499;
      case "invalid_argument", "failed_precondition", "out_of_range" -> 400;
      case "unauthenticated" -> 401;
      case "permission_denied" -> 403;
      case "not_found" -> 404;
      case "already_exists", "aborted" -> 409;
      case "resource_exhausted" -> 429;
      case "unimplemented" -> 501;
      case "unavailable" -> 503;
      case "deadline_exceeded" -> 504;
      default -> 500;
    };
  }

  /**
   * A server error as its Connect code: the file errors as envd reports them, the rest internal.
   */
  static RpcException map(Exception e) {
    if (e instanceof RpcException r) {
      return r;
    }
    if (e instanceof E2bControlPlane.E2bError x) {
      // 502 is the proxy's "not running" (envd's own answers never use it)
      return new RpcException(
          x.status == 502 ? "unavailable" : x.status == 400 ? "invalid_argument" : "unknown",
          x.getMessage());
    }
    ApiException a = ApiServlet.map(e);
    String code =
        switch (a.code) {
          case NOT_FOUND, NO_SUCH_FILE -> "not_found";
          case ALREADY_EXISTS -> "already_exists";
          case ACCESS_DENIED -> "permission_denied";
          case INVALID_REQUEST, IS_DIRECTORY, NOT_DIRECTORY, DIRECTORY_NOT_EMPTY, FILE_ERROR ->
              "invalid_argument";
          case UNAUTHENTICATED -> "unauthenticated";
          case TIMEOUT -> "deadline_exceeded";
          case QUOTA_EXCEEDED, RATE_LIMITED -> "resource_exhausted";
          case NOT_SUPPORTED -> "unimplemented";
          case UNAVAILABLE -> "unavailable";
          default -> "internal";
        };
    return new RpcException(code, a.getMessage());
  }

  /** Whether the request is a streaming call; refuses any codec but JSON. */
  static boolean streaming(HttpServletRequest request) {
    String type = request.getContentType();
    String base =
        type == null ? "" : type.split(";", 2)[0].trim().toLowerCase(java.util.Locale.ROOT);
    return switch (base) {
      case UNARY_JSON -> false;
      case STREAM_JSON -> true;
      case "application/proto", "application/connect+proto" ->
          throw new RpcException(
              "unimplemented",
              "this server speaks Connect with the JSON codec only (the e2b SDK's), not " + base);
      default -> throw invalid("Content-Type must be application/json or " + STREAM_JSON);
    };
  }

  /** The request message: the body of a unary call, the first envelope of a streaming one. */
  static JsonNode readRequest(HttpServletRequest request, boolean streaming) throws IOException {
    byte[] bytes;
    try (InputStream in = request.getInputStream()) {
      if (streaming) {
        DataInputStream data = new DataInputStream(in);
        int flags;
        int length;
        try {
          flags = data.readUnsignedByte();
          length = data.readInt();
        } catch (EOFException e) {
          throw invalid("a streaming call must send its request in a Connect envelope");
        }
        if ((flags & 0x01) != 0) {
          throw new RpcException("unimplemented", "compressed messages are not supported");
        }
        if (length < 0 || length > MAX_MESSAGE) {
          throw invalid("request message of " + length + " bytes is over the limit");
        }
        bytes = data.readNBytes(length);
        if (bytes.length != length) {
          throw invalid("the request envelope ended early");
        }
      } else {
        bytes = in.readNBytes(MAX_MESSAGE + 1);
        if (bytes.length > MAX_MESSAGE) {
          throw invalid("request message is over the limit of " + MAX_MESSAGE + " bytes");
        }
      }
    }
    if (bytes.length == 0) {
      return Json.object();
    }
    try {
      JsonNode node = Json.MAPPER.readTree(bytes);
      if (node == null || !node.isObject()) {
        throw invalid("the request message must be a JSON object");
      }
      return node;
    } catch (com.fasterxml.jackson.core.JacksonException e) {
      throw invalid("the request message is not JSON: " + e.getOriginalMessage());
    }
  }

  static void unary(HttpServletResponse response, JsonNode message) throws IOException {
    byte[] bytes = Json.MAPPER.writeValueAsBytes(message);
    response.setStatus(200);
    response.setContentType(UNARY_JSON);
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  static void unaryError(HttpServletResponse response, RpcException e) throws IOException {
    ObjectNode body = Json.object().put("code", e.code).put("message", e.getMessage());
    byte[] bytes = Json.MAPPER.writeValueAsBytes(body);
    response.setStatus(status(e.code));
    response.setContentType(UNARY_JSON);
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  /** The answer of a server-streaming call: messages, then one end. Not thread-safe. */
  static final class Stream {
    private final HttpServletResponse response;
    private OutputStream out;
    private boolean ended;

    Stream(HttpServletResponse response) {
      this.response = response;
    }

    private OutputStream out() throws IOException {
      if (out == null) {
        response.setStatus(200);
        response.setContentType(STREAM_JSON);
        out = response.getOutputStream();
      }
      return out;
    }

    void send(JsonNode message) throws IOException {
      envelope(0, Json.MAPPER.writeValueAsBytes(message));
    }

    void end(RpcException error) throws IOException {
      if (ended) {
        return;
      }
      ended = true;
      ObjectNode trailer = Json.object();
      if (error != null) {
        trailer.putObject("error").put("code", error.code).put("message", error.getMessage());
      }
      envelope(0x02, Json.MAPPER.writeValueAsBytes(trailer));
    }

    private void envelope(int flags, byte[] payload) throws IOException {
      OutputStream o = out();
      byte[] head = {
        (byte) flags,
        (byte) (payload.length >>> 24),
        (byte) (payload.length >>> 16),
        (byte) (payload.length >>> 8),
        (byte) payload.length
      };
      o.write(head);
      o.write(payload);
      o.flush();
    }
  }
}
