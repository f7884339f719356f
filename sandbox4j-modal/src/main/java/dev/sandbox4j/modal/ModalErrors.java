package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * Turns a gRPC failure from Modal into the workspace exception that tells the caller what to do
 * next. Only a call about one sandbox can say that the sandbox is gone: there {@code NOT_FOUND} is
 * {@link WorkspaceUnavailableException}; elsewhere (an app, an image, a secret) it is a plain
 * {@link WorkspaceException}, like every other code. Retryable codes reach here only once the
 * retries are spent.
 */
final class ModalErrors {
  private ModalErrors() {}

  /** A failure of a call that is not about one sandbox. */
  static WorkspaceException translate(String what, StatusRuntimeException e) {
    return new WorkspaceException(message(what, e.getStatus()), e);
  }

  /** A failure of a call about sandbox {@code id}: NOT_FOUND means it is gone. */
  static WorkspaceException translateForSandbox(String what, String id, StatusRuntimeException e) {
    Status status = e.getStatus();
    if (status.getCode() == Status.Code.NOT_FOUND) {
      return new WorkspaceUnavailableException(
          "Modal sandbox " + id + " no longer exists (" + describe(status) + ")", e);
    }
    return new WorkspaceException(message(what, status), e);
  }

  private static String message(String what, Status status) {
    String hint =
        switch (status.getCode()) {
          case UNAUTHENTICATED, PERMISSION_DENIED ->
              ": Modal refused the credentials (check MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or the"
                  + " profile in ~/.modal.toml)";
          case RESOURCE_EXHAUSTED -> ": a Modal quota or rate limit was reached";
          case INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE -> ": Modal refused the request";
          case ALREADY_EXISTS -> ": the name is taken";
          case UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN, CANCELLED ->
              ": Modal did not answer after " + Retries.MAX_RETRIES + " retries";
          case UNIMPLEMENTED -> ": the server does not know this call";
          default -> "";
        };
    return what + " failed" + hint + " (" + describe(status) + ")";
  }

  private static String describe(Status status) {
    return status.getDescription() == null
        ? status.getCode().toString()
        : status.getCode() + ": " + status.getDescription();
  }
}
