package dev.sandbox4j.runtime.internal.egress;

/** A denial or failure to answer with {@code status} and {@code message}. */
final class Refusal extends Exception {
  private static final long serialVersionUID = 1L;

  final int status;

  Refusal(int status, String message) {
    super(message, null, false, false);
    this.status = status;
  }
}
