package dev.sandbox4j.server;

/**
 * A request the server answers with an error: HTTP status, a code from docs/server-api.md, a
 * message, and the request field or sandbox path it is about (either may be null).
 */
final class ApiException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  final int status;
  final String code;
  final String field;
  final String path;
  final Long retryAfterSeconds;

  ApiException(
      int status, String code, String message, String field, String path, Long retryAfter) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.path = path;
    this.retryAfterSeconds = retryAfter;
  }

  static ApiException invalid(String field, String message) {
    return new ApiException(400, "invalid_request", message, field, null, null);
  }

  static ApiException notFound(String what) {
    return new ApiException(404, "not_found", what, null, null, null);
  }

  static ApiException unavailable(String message) {
    return new ApiException(503, "unavailable", message, null, null, null);
  }
}
