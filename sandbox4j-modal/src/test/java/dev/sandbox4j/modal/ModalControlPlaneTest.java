package dev.sandbox4j.modal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceException;
import io.grpc.Status;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Headers, the auth token and its refresh, and retries with idempotency keys, against the fake's
 * control plane (no sandbox is created, so no local engine is needed).
 */
class ModalControlPlaneTest {
  @TempDir Path home;
  private final FakeModal modal = new FakeModal();

  @AfterEach
  void stop() {
    modal.close();
  }

  /** A call that needs the auth token and nothing else: AppGetOrCreate, then SandboxList. */
  private static void call(ModalSandbox client) {
    assertThat(client.list()).isEmpty();
  }

  @Test
  void everyCallCarriesModalsHeaders() {
    try (ModalSandbox client = modal.client(home).build()) {
      call(client);
    }
    for (FakeModal.Call c : modal.calls) {
      assertThat(c.header(ControlPlane.CLIENT_TYPE)).isEqualTo("7");
      assertThat(c.header(ControlPlane.CLIENT_VERSION)).isEqualTo("1.0.0");
      assertThat(c.header(ControlPlane.LIBMODAL_VERSION)).startsWith("sandbox4j-modal/");
      assertThat(c.header(ControlPlane.TOKEN_ID)).isEqualTo(FakeModal.TOKEN_ID);
      assertThat(c.header(ControlPlane.TOKEN_SECRET)).isEqualTo(FakeModal.TOKEN_SECRET);
    }
    assertThat(modal.calls(("AuthTokenGet")).getFirst().header(ControlPlane.AUTH_TOKEN))
        .as("AuthTokenGet carries no auth token")
        .isNull();
    assertThat(modal.calls("SandboxList").getFirst().header(ControlPlane.AUTH_TOKEN)).isNotNull();
  }

  @Test
  void oneTokenServesManyCalls() {
    try (ModalSandbox client = modal.client(home).build()) {
      call(client);
      call(client);
      call(client);
    }
    assertThat(modal.calls("AuthTokenGet")).hasSize(1);
  }

  @Test
  void tokenIsRefreshedWithinFiveMinutesOfItsExpiry() {
    AtomicReference<Instant> now = new AtomicReference<>(Instant.now());
    Clock clock =
        new Clock() {
          @Override
          public Instant instant() {
            return now.get();
          }

          @Override
          public java.time.ZoneId getZone() {
            return ZoneOffset.UTC;
          }

          @Override
          public Clock withZone(java.time.ZoneId zone) {
            return this;
          }
        };
    try (ModalSandbox client = modal.client(home).clock(clock).build()) {
      call(client);
      now.set(now.get().plus(Duration.ofMinutes(54)));
      call(client);
      assertThat(modal.calls("AuthTokenGet")).as("6 minutes left: kept").hasSize(1);
      now.set(now.get().plus(Duration.ofMinutes(2)));
      call(client);
      assertThat(modal.calls("AuthTokenGet")).as("4 minutes left: refreshed").hasSize(2);
    }
  }

  @Test
  void shortLivedTokensAreFetchedAgain() {
    modal.tokenLifetime = Duration.ofMinutes(4); // always inside the refresh window
    try (ModalSandbox client = modal.client(home).build()) {
      call(client);
      call(client);
    }
    assertThat(modal.calls("AuthTokenGet").size()).isGreaterThanOrEqualTo(3);
  }

  @Test
  void aRejectedTokenIsReplacedOnce() {
    try (ModalSandbox client = modal.client(home).build()) {
      call(client);
      modal.failNext("SandboxList", Status.UNAUTHENTICATED.withDescription("token expired"), 1);
      call(client);
      assertThat(modal.calls("AuthTokenGet")).hasSize(2);
      modal.failNext("SandboxList", Status.UNAUTHENTICATED, 2);
      assertThatThrownBy(() -> call(client))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("refused the credentials");
    }
  }

  @Test
  void wrongCredentialsFailWithoutRetries() {
    try (ModalSandbox client = modal.client(home).token("ak-wrong", "as-wrong").build()) {
      assertThatThrownBy(() -> call(client))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("refused the credentials")
          .hasMessageContaining("UNAUTHENTICATED");
    }
    assertThat(modal.calls("AuthTokenGet")).hasSize(1);
    assertThat(modal.calls("AppGetOrCreate")).isEmpty();
  }

  @Test
  void retryableFailuresAreRetriedWithOneIdempotencyKey() {
    modal.failNext("AppGetOrCreate", Status.UNAVAILABLE, 2);
    modal.failNext("AppGetOrCreate", Status.INTERNAL, 1);
    try (ModalSandbox client = modal.client(home).build()) {
      call(client);
    }
    List<FakeModal.Call> attempts = modal.calls("AppGetOrCreate");
    assertThat(attempts).hasSize(4);
    assertThat(attempts.stream().map(c -> c.header(ControlPlane.IDEMPOTENCY_KEY)).distinct())
        .as("the same key on every attempt")
        .hasSize(1);
    assertThat(attempts.stream().map(c -> c.header(ControlPlane.RETRY_ATTEMPT)))
        .containsExactly("0", "1", "2", "3");
    assertThat(attempts.getLast().header(ControlPlane.RETRY_DELAY)).matches("\\d+\\.\\d{3}");
    assertThat(Double.parseDouble(attempts.getLast().header(ControlPlane.RETRY_DELAY)))
        .as("100 + 200 + 400 ms of backoff")
        .isGreaterThanOrEqualTo(0.7);
  }

  @Test
  void retriesEndAfterThree() {
    modal.failNext("AppGetOrCreate", Status.DEADLINE_EXCEEDED, 4);
    try (ModalSandbox client = modal.client(home).build()) {
      assertThatThrownBy(() -> call(client))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("did not answer after 3 retries");
    }
    assertThat(modal.calls("AppGetOrCreate")).hasSize(4);
  }

  @Test
  void nonRetryableFailuresAreNotRetried() {
    modal.failNext("AppGetOrCreate", Status.INVALID_ARGUMENT.withDescription("bad name"), 1);
    try (ModalSandbox client = modal.client(home).build()) {
      assertThatThrownBy(() -> call(client))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("bad name");
    }
    assertThat(modal.calls("AppGetOrCreate")).hasSize(1);
  }

  @Test
  void aLostAnswerIsRecoveredByTheSameKey() {
    modal.loseNextResponse("AppGetOrCreate");
    try (ModalSandbox client = modal.client(home).appName("lost").build()) {
      call(client);
    }
    List<FakeModal.Call> attempts = modal.calls("AppGetOrCreate");
    assertThat(attempts).hasSize(2);
    assertThat(attempts.get(0).header(ControlPlane.IDEMPOTENCY_KEY))
        .isEqualTo(attempts.get(1).header(ControlPlane.IDEMPOTENCY_KEY));
  }

  @Test
  void missingAppIsReportedWhenNotCreated() {
    try (ModalSandbox client =
        modal.client(home).appName("absent").createAppIfMissing(false).build()) {
      assertThatThrownBy(() -> call(client))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("Modal app 'absent' not found");
    }
  }

  @Test
  void credentialsFromAProfileReachTheServer() throws Exception {
    java.nio.file.Files.writeString(
        home.resolve(".modal.toml"),
        "[fake]\nserver_url = \""
            + modal.url()
            + "\"\ntoken_id = \""
            + FakeModal.TOKEN_ID
            + "\"\ntoken_secret = \""
            + FakeModal.TOKEN_SECRET
            + "\"\nactive = true\n");
    try (ModalSandbox client = ModalSandbox.builder().configSource(Map.of(), home).build()) {
      call(client);
    }
    assertThat(modal.calls("SandboxList")).hasSize(1);
  }
}
