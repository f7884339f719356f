package dev.sandbox4j.runtime.internal.ports;

/** A request the proxy refuses, with the status to answer. */
final class BadRequest extends Exception {
  private static final long serialVersionUID = 1L;
  final int status;

  BadRequest(int status, String message) {
    super(message, null, false, false);
    this.status = status;
  }
}
