package dev.sandbox4j.server;

/**
 * Every code the server puts in an error ({@code {"error": {"code": ...}}}, an exec {@code error}
 * event, the metrics' {@code code} label), with its HTTP status and what it means. The table of
 * docs/server-api.md lists exactly these (a test compares them), and the remote client matches on
 * their spelling, so a code is never renamed: a new case gets a new code.
 */
enum ErrorCode {
  INVALID_REQUEST(400, "invalid_request", "a malformed body, an unknown field or a bad value"),
  UNAUTHENTICATED(401, "unauthenticated", "no API key, or an unknown or revoked one"),
  ACCESS_DENIED(403, "access_denied", "the sandbox user may not do this to the file"),
  NOT_FOUND(404, "not_found", "no such sandbox, snapshot, command, image or route here"),
  NO_SUCH_FILE(404, "no_such_file", "the file path does not exist in the sandbox"),
  METHOD_NOT_ALLOWED(405, "method_not_allowed", "the path exists, not with this method"),
  TIMEOUT(408, "timeout", "the command's timeout ran out (exec events only)"),
  ALREADY_EXISTS(409, "already_exists", "the file already exists"),
  IS_DIRECTORY(409, "is_directory", "the path is a directory"),
  NOT_DIRECTORY(409, "not_directory", "the path, or a parent of it, is not a directory"),
  DIRECTORY_NOT_EMPTY(409, "directory_not_empty", "the directory is not empty"),
  FILE_ERROR(409, "file_error", "any other failure of a file operation"),
  STDIN_CLOSED(
      409,
      "stdin_closed",
      "the background command's stdin takes no more: closed, ended, unread or not kept open"),
  STDIN_BUSY(409, "stdin_busy", "a write to the command's stdin still waits for it to read"),
  TOO_LARGE(413, "too_large", "the request body is over the server's limit"),
  OUTPUT_LIMIT(413, "output_limit", "the command's output went over its limit (exec events only)"),
  QUOTA_EXCEEDED(429, "quota_exceeded", "the organization's sandboxes or commands are at quota"),
  RATE_LIMITED(429, "rate_limited", "too many sandboxes created: retry after Retry-After"),
  INTERNAL(500, "internal", "a bug; the message says what failed"),
  NOT_SUPPORTED(
      501,
      "not_supported",
      "the server's provider cannot do this (e.g. hibernate on docker): the message names both"),
  UNAVAILABLE(503, "unavailable", "the sandbox exists but cannot be reached"),
  INSUFFICIENT_DISK(503, "insufficient_disk", "the host is below its free-space reserve");

  private final int status;
  private final String spelling;
  private final String meaning;

  ErrorCode(int status, String spelling, String meaning) {
    this.status = status;
    this.spelling = spelling;
    this.meaning = meaning;
  }

  /** The HTTP status of an answer with this code. */
  int status() {
    return status;
  }

  /** The code as the API spells it, such as {@code not_found}. */
  String spelling() {
    return spelling;
  }

  /** What the code means, in one line. */
  String meaning() {
    return meaning;
  }
}
