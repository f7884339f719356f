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
 * {"error": ...}} or {@code {}}. Both codecs: JSON (the e2b SDK's transport is created with {@code
 * useBinaryFormat: false}) and binary protobuf ({@code application/proto}, {@code
 * application/connect+proto}), translated to and from the same JSON with the descriptors of envd's
 * messages ({@code src/main/proto}) and protobuf's JsonFormat, so the handlers speak JSON only.
 * Errors and the end-of-stream trailer are JSON with both, as the protocol has them.
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

  /**
   * How one call is encoded: streaming or unary, and, for the binary codec, the method's request
   * and response message types.
   */
  record Codec(
      boolean streaming,
      com.google.protobuf.Descriptors.Descriptor input,
      com.google.protobuf.Descriptors.Descriptor output) {

    boolean binary() {
      return input != null;
    }

    String contentType() {
      return streaming
          ? (binary() ? "application/connect+proto" : STREAM_JSON)
          : (binary() ? "application/proto" : UNARY_JSON);
    }

    byte[] encode(JsonNode message) throws IOException {
      if (!binary()) {
        return Json.MAPPER.writeValueAsBytes(message);
      }
      return E2bProtoJson.fromJson(message, output).toByteArray();
    }

    JsonNode decode(byte[] bytes) throws IOException {
      if (!binary()) {
        return Json.MAPPER.readTree(bytes);
      }
      try {
        com.google.protobuf.DynamicMessage m =
            com.google.protobuf.DynamicMessage.parseFrom(input, bytes);
        return E2bProtoJson.toJson(m);
      } catch (com.google.protobuf.InvalidProtocolBufferException e) {
        throw invalid("the request is not a " + input.getFullName() + ": " + e.getMessage());
      }
    }
  }

  private static final java.util.List<com.google.protobuf.Descriptors.FileDescriptor> ENVD =
      java.util.List.of(
          dev.sandbox4j.server.internal.e2b.EnvdProcess.getDescriptor(),
          dev.sandbox4j.server.internal.e2b.EnvdFilesystem.getDescriptor());

  /**
   * The codec of a call to {@code service/method} (e.g. {@code process.Process}, {@code Start}),
   * from its Content-Type.
   */
  static Codec codec(HttpServletRequest request, String service, String method) {
    String type = request.getContentType();
    String base =
        type == null ? "" : type.split(";", 2)[0].trim().toLowerCase(java.util.Locale.ROOT);
    boolean streaming;
    boolean binary;
    switch (base) {
      case UNARY_JSON -> {
        streaming = false;
        binary = false;
      }
      case STREAM_JSON -> {
        streaming = true;
        binary = false;
      }
      case "application/proto" -> {
        streaming = false;
        binary = true;
      }
      case "application/connect+proto" -> {
        streaming = true;
        binary = true;
      }
      default ->
          throw invalid(
              "Content-Type must be application/json, application/proto, "
                  + STREAM_JSON
                  + " or application/connect+proto");
    }
    if (!binary) {
      return new Codec(streaming, null, null);
    }
    int dot = service.indexOf('.');
    for (com.google.protobuf.Descriptors.FileDescriptor file : ENVD) {
      com.google.protobuf.Descriptors.ServiceDescriptor s =
          file.findServiceByName(service.substring(dot + 1));
      if (s != null && file.getPackage().equals(service.substring(0, dot))) {
        com.google.protobuf.Descriptors.MethodDescriptor m = s.findMethodByName(method);
        if (m == null) {
          throw new RpcException("unimplemented", "no method " + service + "/" + method);
        }
        return new Codec(streaming, m.getInputType(), m.getOutputType());
      }
    }
    throw new RpcException("unimplemented", "no service " + service);
  }

  /** The request message: the body of a unary call, the first envelope of a streaming one. */
  static JsonNode readRequest(HttpServletRequest request, Codec codec) throws IOException {
    boolean streaming = codec.streaming();
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
      JsonNode node = codec.decode(bytes);
      if (node == null || !node.isObject()) {
        throw invalid("the request message must be a JSON object");
      }
      return node;
    } catch (com.fasterxml.jackson.core.JacksonException e) {
      throw invalid("the request message is not JSON: " + e.getOriginalMessage());
    }
  }

  static void unary(HttpServletResponse response, Codec codec, JsonNode message)
      throws IOException {
    byte[] bytes = codec.encode(message);
    response.setStatus(200);
    response.setContentType(codec.contentType());
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
    private final Codec codec;
    private OutputStream out;
    private boolean ended;

    Stream(HttpServletResponse response, Codec codec) {
      this.response = response;
      this.codec = codec;
    }

    private OutputStream out() throws IOException {
      if (out == null) {
        response.setStatus(200);
        response.setContentType(codec.contentType());
        out = response.getOutputStream();
      }
      return out;
    }

    void send(JsonNode message) throws IOException {
      envelope(0, codec.encode(message));
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
