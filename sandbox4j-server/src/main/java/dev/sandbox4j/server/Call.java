package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;
import java.util.Map;
import java.util.Set;

/** One request being served: what the route bound, who asks, and helpers to read and answer. */
final class Call {

  static final int MAX_PATH_BYTES = 4096;

  final HttpServletRequest request;
  final HttpServletResponse response;
  final Map<String, String> params;
  final long maxJsonBytes;

  /** How much of an oversized JSON body is read and dropped so that its 413 reaches the client. */
  static final long DRAIN_BYTES = 16L << 20;

  Organization organization;

  Call(
      HttpServletRequest request,
      HttpServletResponse response,
      Map<String, String> params,
      long maxJsonBytes) {
    this.request = request;
    this.response = response;
    this.params = params;
    this.maxJsonBytes = maxJsonBytes;
  }

  String param(String name) {
    return params.get(name);
  }

  /** The JSON body as a {@code type}; an empty body is {@code empty} when that is non-null. */
  <T> T body(Class<T> type, T empty) throws IOException {
    byte[] bytes;
    try (InputStream in = request.getInputStream()) {
      if (request.getContentLengthLong() > maxJsonBytes) {
        throw tooLarge(in);
      }
      bytes = in.readNBytes((int) maxJsonBytes + 1);
      if (bytes.length > maxJsonBytes) {
        throw tooLarge(in);
      }
    }
    if (bytes.length == 0 && empty != null) {
      return empty;
    }
    return Json.parse(bytes, type);
  }

  /**
   * The 413 for a body over the limit, after reading and dropping up to {@link #DRAIN_BYTES} more
   * of it: a client still sending its body reads the answer then, where a connection closed with
   * its bytes unread is reset and the answer lost (the client saw "no bytes" about one time in
   * twelve). A bigger body is cut.
   */
  private ApiException tooLarge(InputStream in) throws IOException {
    byte[] sink = new byte[64 * 1024];
    long left = DRAIN_BYTES;
    int n;
    while (left > 0 && (n = in.read(sink, 0, (int) Math.min(sink.length, left))) > 0) {
      left -= n;
    }
    return new ApiException(
        ErrorCode.TOO_LARGE,
        "the JSON body is over the server's limit of " + maxJsonBytes + " bytes",
        null,
        null,
        null);
  }

  /** Refuses query parameters other than {@code allowed}: a typo must not be ignored silently. */
  void onlyQuery(Set<String> allowed) {
    for (String name : request.getParameterMap().keySet()) {
      if (!allowed.contains(name)) {
        throw ApiException.invalid(
            name, "unknown query parameter '" + Sandboxes.printable(name) + "'");
      }
    }
  }

  /** The query parameter {@code name}, or null without it; given more than once, a 400. */
  String singleQuery(String name) {
    String[] values = request.getParameterValues(name);
    if (values == null) {
      return null;
    }
    if (values.length != 1) {
      throw ApiException.invalid(name, name + " may be given once");
    }
    return values[0];
  }

  /** The {@code path} query parameter, checked as docs/server-api.md says. */
  String pathQuery() {
    onlyQuery(Set.of("path"));
    String[] values = request.getParameterValues("path");
    if (values == null || values.length != 1) {
      throw ApiException.invalid("path", "give the path once: ?path=...");
    }
    return checkPath("path", values[0]);
  }

  static String checkPath(String field, String path) {
    if (path == null || path.isEmpty()) {
      throw ApiException.invalid(field, field + " must not be empty");
    }
    if (path.indexOf('\0') >= 0) {
      throw ApiException.invalid(field, field + " must not contain NUL");
    }
    if (path.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > MAX_PATH_BYTES) {
      throw ApiException.invalid(field, field + " is longer than " + MAX_PATH_BYTES + " bytes");
    }
    return path;
  }

  void json(int status, JsonNode body) throws IOException {
    response.setStatus(status);
    response.setContentType("application/json");
    response.setCharacterEncoding("UTF-8");
    byte[] bytes = Json.MAPPER.writeValueAsBytes(body);
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
  }

  void noContent() {
    response.setStatus(204);
  }
}
