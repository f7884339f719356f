package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.util.Callback;

/**
 * Errors Jetty answers by itself (a malformed or ambiguous URI, a header too large) in the API's
 * JSON error shape instead of an HTML page: clients parse one error format.
 */
final class JsonErrors {

  private JsonErrors() {}

  static byte[] body(int status, String message) throws IOException {
    ErrorCode code =
        switch (status) {
          case 401 -> ErrorCode.UNAUTHENTICATED;
          case 404 -> ErrorCode.NOT_FOUND;
          case 405 -> ErrorCode.METHOD_NOT_ALLOWED;
          case 413, 414, 431 -> ErrorCode.TOO_LARGE;
          case 503 -> ErrorCode.UNAVAILABLE;
          default -> status >= 500 ? ErrorCode.INTERNAL : ErrorCode.INVALID_REQUEST;
        };
    ObjectNode body = Json.object();
    body.putObject("error")
        .put("code", code.spelling())
        .put("message", message == null ? "HTTP " + status : message);
    return Json.MAPPER.writeValueAsBytes(body);
  }

  private static void writeJson(Response response, int code, String message, Callback callback)
      throws IOException {
    byte[] bytes = body(code, message);
    response.getHeaders().put(HttpHeader.CONTENT_TYPE, "application/json");
    response.getHeaders().put(HttpHeader.CONTENT_LENGTH, bytes.length);
    response.write(true, ByteBuffer.wrap(bytes), callback);
  }

  /** For errors outside the servlet context. */
  static final class Core extends org.eclipse.jetty.server.handler.ErrorHandler {
    @Override
    protected void generateResponse(
        Request request,
        Response response,
        int code,
        String message,
        Throwable cause,
        Callback callback)
        throws IOException {
      writeJson(response, code, message, callback);
    }
  }

  /** For errors inside the servlet context. */
  static final class Servlets extends org.eclipse.jetty.ee10.servlet.ErrorHandler {
    @Override
    protected void generateResponse(
        Request request,
        Response response,
        int code,
        String message,
        Throwable cause,
        Callback callback)
        throws IOException {
      writeJson(response, code, message, callback);
    }

    @Override
    protected boolean generateAcceptableResponse(
        Request request,
        Response response,
        Callback callback,
        String contentType,
        java.util.List<java.nio.charset.Charset> charsets,
        int code,
        String message,
        Throwable cause)
        throws IOException {
      writeJson(response, code, message, callback);
      return true;
    }
  }
}
