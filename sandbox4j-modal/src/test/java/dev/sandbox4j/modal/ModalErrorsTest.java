package dev.sandbox4j.modal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Status;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Each gRPC status code's workspace exception, and which codes are retried. */
class ModalErrorsTest {

  @ParameterizedTest
  @EnumSource(Status.Code.class)
  void everyCodeOfASandboxCall(Status.Code code) {
    WorkspaceException e =
        ModalErrors.translateForSandbox(
            "running a command in sb-1",
            "sb-1",
            Status.fromCode(code).withDescription("detail").asRuntimeException());
    if (code == Status.Code.NOT_FOUND) {
      assertThat(e).isInstanceOf(WorkspaceUnavailableException.class);
      assertThat(e.getMessage()).contains("sb-1 no longer exists");
    } else {
      assertThat(e).isNotInstanceOf(WorkspaceUnavailableException.class);
      assertThat(e.getMessage()).contains("running a command in sb-1 failed");
    }
    assertThat(e.getMessage()).contains(code.toString()).contains("detail");
    String hint =
        switch (code) {
          case UNAUTHENTICATED, PERMISSION_DENIED -> "refused the credentials";
          case RESOURCE_EXHAUSTED -> "quota or rate limit";
          case INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE -> "refused the request";
          case ALREADY_EXISTS -> "name is taken";
          case UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN, CANCELLED -> "did not answer";
          case UNIMPLEMENTED -> "does not know this call";
          case NOT_FOUND -> "no longer exists";
          default -> "";
        };
    assertThat(e.getMessage()).contains(hint);
  }

  @ParameterizedTest
  @EnumSource(Status.Code.class)
  void onlyASandboxCallSaysGone(Status.Code code) {
    WorkspaceException e =
        ModalErrors.translate("looking up app x", Status.fromCode(code).asRuntimeException());
    assertThat(e).isNotInstanceOf(WorkspaceUnavailableException.class);
    assertThat(e.getMessage()).startsWith("looking up app x failed");
  }

  @ParameterizedTest
  @EnumSource(Status.Code.class)
  void retryableCodesAreLibmodals(Status.Code code) {
    boolean expected =
        switch (code) {
          case DEADLINE_EXCEEDED, UNAVAILABLE, CANCELLED, INTERNAL, UNKNOWN -> true;
          default -> false;
        };
    assertThat(Retries.retryable(code)).isEqualTo(expected);
  }
}
