package dev.sandbox4j.boxd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Status;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Each gRPC status code's mapping, and which calls are retried. */
class BoxdCallErrorsTest {

  private static FakeBoxd boxd;
  private BoxdSandbox client;

  @BeforeAll
  static void startFake() throws Exception {
    boxd = new FakeBoxd();
  }

  @AfterAll
  static void stopFake() {
    if (boxd != null) {
      boxd.close();
    }
  }

  @BeforeEach
  void newClient() {
    client = boxd.client().build();
    client.list(); // exchange the key now, so that counts below are of the calls alone
    boxd.calls.clear();
    boxd.authorizations.clear();
  }

  @ParameterizedTest
  @EnumSource(
      value = Status.Code.class,
      names = {"INVALID_ARGUMENT", "ALREADY_EXISTS", "OUT_OF_RANGE"})
  void aRefusedArgumentIsAnIllegalArgument(Status.Code code) {
    boxd.failNext("ListVms", Status.fromCode(code).withDescription("the service's words"), 1);
    assertThatThrownBy(client::list)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ListVms")
        .hasMessageContaining(code.name())
        .hasMessageContaining("the service's words");
    assertThat(boxd.calls("ListVms")).isEqualTo(1);
  }

  @ParameterizedTest
  @EnumSource(
      value = Status.Code.class,
      names = {
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "INTERNAL",
        "UNKNOWN",
        "UNIMPLEMENTED",
        "DEADLINE_EXCEEDED",
        "ABORTED",
        "DATA_LOSS"
      })
  void otherFailuresAreWorkspaceExceptionsNamingTheCodeAndAreNotRetried(Status.Code code) {
    boxd.failNext("ListVms", Status.fromCode(code), 1);
    assertThatThrownBy(client::list)
        .isExactlyInstanceOf(WorkspaceException.class)
        .hasMessageContaining(code.name());
    assertThat(boxd.calls("ListVms")).isEqualTo(1);
  }

  @Test
  void notFoundOnAMachineMeansItIsGone() {
    WorkspaceRef ref = new WorkspaceRef("boxd", "vm-unknown");
    assertThatThrownBy(() -> client.suspend(ref))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("vm-unknown");
    assertThat(client.info(ref)).isEmpty();
  }

  @Test
  void notFoundWithoutAMachineIsAPlainFailure() {
    boxd.failNext("ListVms", Status.NOT_FOUND, 1);
    assertThatThrownBy(client::list).isExactlyInstanceOf(WorkspaceException.class);
  }

  @Test
  void unavailableIsRetriedTwiceWithTheSameTokenThenSucceeds() {
    boxd.failNext("ListVms", Status.UNAVAILABLE, 2);
    assertThat(client.list()).isNotNull();
    assertThat(boxd.calls("ListVms")).isEqualTo(3);
    assertThat(boxd.tokenExchanges).hasValue(1);
    assertThat(List.copyOf(boxd.authorizations))
        .hasSize(3)
        .containsOnly(boxd.authorizations.get(0));
  }

  @Test
  void unavailableThreeTimesFailsAfterTwoRetries() {
    boxd.failNext("ListVms", Status.UNAVAILABLE, 3);
    assertThatThrownBy(client::list)
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("UNAVAILABLE")
        .hasMessageContaining("2 retries");
    assertThat(boxd.calls("ListVms")).isEqualTo(3);
  }

  @Test
  void aCreationIsNeverRetriedSinceTheApiHasNoIdempotencyKey() {
    boxd.failNext("CreateVm", Status.UNAVAILABLE, 1);
    var ws = dev.sandbox4j.workspace.Workspace.of(client.newBackend());
    assertThatThrownBy(ws::workingDirectory)
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("CreateVm");
    assertThat(boxd.calls("CreateVm")).isEqualTo(1);
    assertThat(ws.ref()).as("no machine, no ref").isEmpty();
  }

  @Test
  void unauthenticatedTwiceInARowIsReported() {
    boxd.failNext("ListVms", Status.UNAUTHENTICATED, 2);
    assertThatThrownBy(client::list)
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("UNAUTHENTICATED");
    assertThat(boxd.calls("ListVms")).as("once with a fresh token, then no more").isEqualTo(2);
  }

  @Test
  void anInterruptedCallIsACancellation() throws Exception {
    Thread.currentThread().interrupt();
    try {
      assertThatThrownBy(client::list)
          .isInstanceOf(java.util.concurrent.CancellationException.class);
      assertThat(Thread.currentThread().isInterrupted()).isTrue();
    } finally {
      Thread.interrupted();
    }
  }
}
