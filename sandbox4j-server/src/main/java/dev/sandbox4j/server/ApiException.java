package dev.sandbox4j.server;

/**
 * A request the server answers with an error: an {@link ErrorCode} (which gives the HTTP status), a
 * message, and the request field or sandbox path it is about (either may be null).
 */
final class ApiException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  final int status;
  final ErrorCode code;
  final String field;
  final String path;
  final Long retryAfterSeconds;

  ApiException(ErrorCode code, String message, String field, String path, Long retryAfter) {
    super(message);
    this.status = code.status();
    this.code = code;
    this.field = field;
    this.path = path;
    this.retryAfterSeconds = retryAfter;
  }

  static ApiException invalid(String field, String message) {
    return new ApiException(ErrorCode.INVALID_REQUEST, message, field, null, null);
  }

  static ApiException notFound(String what) {
    return new ApiException(ErrorCode.NOT_FOUND, what, null, null, null);
  }

  static ApiException notSupported(String field, String message) {
    return new ApiException(ErrorCode.NOT_SUPPORTED, message, field, null, null);
  }

  static ApiException unavailable(String message) {
    return new ApiException(ErrorCode.UNAVAILABLE, message, null, null, null);
  }
}
