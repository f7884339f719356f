package dev.sandbox4j.boxd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Credentials: the key → token exchange, renewal before expiry, eviction, and what is sent. */
class BoxdAuthTest {

  private static FakeBoxd boxd;

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
  void reset() {
    boxd.tokenExchanges.set(0);
    boxd.authorizations.clear();
  }

  /** A call that needs no machine: ListVms. */
  private static void call(BoxdSandbox client) {
    client.list();
  }

  @Test
  void anApiKeyIsExchangedOnceForManyCallsAndSentAsABearerToken() {
    BoxdSandbox client = boxd.client().build();
    call(client);
    call(client);
    call(client);
    assertThat(boxd.tokenExchanges).hasValue(1);
    assertThat(boxd.authorizations)
        .hasSize(3)
        .allSatisfy(a -> assertThat(a).matches("ListVms Bearer jwt\\..*"))
        .allSatisfy(a -> assertThat(a).doesNotContain(FakeBoxd.API_KEY));
  }

  @Test
  void buildingDoesNoIo() {
    boxd.client().build().newBackend();
    assertThat(boxd.tokenExchanges).hasValue(0);
    assertThat(boxd.authorizations).isEmpty();
  }

  @Test
  void aTokenIsRenewedBeforeItExpires() {
    AtomicReference<Instant> now = new AtomicReference<>(Instant.now());
    Clock clock =
        new Clock() {
          @Override
          public ZoneOffset getZone() {
            return ZoneOffset.UTC;
          }

          @Override
          public Clock withZone(java.time.ZoneId zone) {
            return this;
          }

          @Override
          public Instant instant() {
            return now.get();
          }
        };
    BoxdSandbox client = boxd.client().clock(clock).build();
    call(client);
    now.set(now.get().plus(boxd.tokenLifetime).minus(BoxdTokens.REFRESH_BEFORE).minusSeconds(5));
    call(client);
    assertThat(boxd.tokenExchanges).as("still well before expiry").hasValue(1);
    now.set(now.get().plusSeconds(10));
    call(client);
    assertThat(boxd.tokenExchanges).as("within a minute of expiry: renewed").hasValue(2);
    assertThat(boxd.authorizations.get(2)).isNotEqualTo(boxd.authorizations.get(0));
  }

  @Test
  void aTokenTheServiceRefusesIsEvictedAndTheCallRetriedWithAFreshOne() {
    BoxdSandbox client = boxd.client().build();
    call(client);
    boxd.revokeTokens();
    call(client);
    assertThat(boxd.tokenExchanges).hasValue(2);
    assertThat(boxd.authorizations).hasSize(3); // ok, refused, ok with the new token
    assertThat(boxd.authorizations.get(2)).isNotEqualTo(boxd.authorizations.get(1));
  }

  @Test
  void aRefusedKeyFailsClearlyWithoutShowingTheKey() {
    String wrong = "bxd_wrongwrongwrongwrongwrongwrongwrongwr";
    BoxdSandbox client = boxd.client().apiKey(wrong).build();
    assertThatThrownBy(() -> call(client))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("refused the API key")
        .hasMessageNotContaining(wrong);
    assertThat(client.toString()).doesNotContain(wrong);
  }

  @Test
  void aTokenIsUsedAsItIsAndNeverExchanged() {
    String jwt = boxd.issueToken();
    BoxdSandbox client = boxd.client().token(jwt).build();
    call(client);
    assertThat(boxd.tokenExchanges).hasValue(0);
    assertThat(boxd.authorizations).containsExactly("ListVms Bearer " + jwt);
  }

  @Test
  void anExpiredTokenCannotBeRenewedAndSaysWhatToCheck() {
    BoxdSandbox client = boxd.client().token(boxd.issueToken()).build();
    boxd.revokeTokens();
    assertThatThrownBy(() -> call(client))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("UNAUTHENTICATED")
        .hasMessageContaining("BOXD_TOKEN");
    assertThat(boxd.authorizations).as("not retried: nothing could renew it").hasSize(1);
  }

  @Test
  void theEnvironmentIsReadInTheSdksOrderAndBuilderValuesWin() {
    String jwt = boxd.issueToken();
    Map<String, String> env =
        Map.of(
            "BOXD_TOKEN",
            jwt,
            "BOXD_API_KEY",
            "bxd_ignoredignoredignoredignoredignoredig",
            "BOXD_BASE_URL",
            boxd.baseUrl(),
            "BOXD_TOKEN_URL",
            boxd.tokenUrl());
    call(BoxdSandbox.builder(env).build());
    assertThat(boxd.authorizations).containsExactly("ListVms Bearer " + jwt);
    assertThat(boxd.tokenExchanges).hasValue(0);

    boxd.authorizations.clear();
    Map<String, String> keyOnly =
        Map.of(
            "BOXD_API_KEY", FakeBoxd.API_KEY,
            "BOXD_BASE_URL", boxd.baseUrl(),
            "BOXD_TOKEN_URL", boxd.tokenUrl());
    call(BoxdSandbox.builder(keyOnly).build());
    assertThat(boxd.tokenExchanges).hasValue(1);

    String builderToken = boxd.issueToken();
    boxd.authorizations.clear();
    call(BoxdSandbox.builder(env).token(builderToken).build());
    assertThat(boxd.authorizations).containsExactly("ListVms Bearer " + builderToken);
  }

  @Test
  void noCredentialsFailsNamingTheVariables() {
    assertThatThrownBy(() -> BoxdSandbox.builder(Map.of()).build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("BOXD_API_KEY")
        .hasMessageContaining("BOXD_TOKEN");
  }

  @Test
  void theBaseUrlsSchemeChoosesTls() {
    assertThat(BoxdEndpoint.parse("https://boxd.sh:9443"))
        .isEqualTo(new BoxdEndpoint("boxd.sh", 9443, true));
    assertThat(BoxdEndpoint.parse("http://boxd.sh:9443"))
        .isEqualTo(new BoxdEndpoint("boxd.sh", 9443, false));
    assertThat(BoxdEndpoint.parse("boxd.sh:9443").tls()).isTrue();
    assertThat(BoxdEndpoint.parse("localhost:9443").tls()).isFalse();
    assertThat(BoxdEndpoint.parse("127.0.0.1:1234").tls()).isFalse();
    assertThat(BoxdEndpoint.parse("https://boxd.sh").port()).isEqualTo(9443);
    assertThatThrownBy(() -> BoxdEndpoint.parse("ftp://boxd.sh"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(BoxdSandbox.builder(Map.of("BOXD_API_KEY", "bxd_x")).build().baseUrl())
        .isEqualTo("https://boxd.sh:9443");
    assertThat(
            BoxdSandbox.builder(Map.of("BOXD_API_KEY", "bxd_x", "BOXD_API_URL", "http://h:1"))
                .build()
                .baseUrl())
        .as("the deprecated BOXD_API_URL still counts")
        .isEqualTo("http://h:1");
  }

  @Test
  void theExchangeIsNotRepeatedForConcurrentFirstCalls() throws Exception {
    BoxdSandbox client = boxd.client().build();
    Thread[] threads = new Thread[8];
    for (int i = 0; i < threads.length; i++) {
      threads[i] = Thread.ofVirtual().start(() -> call(client));
    }
    for (Thread t : threads) {
      t.join(Duration.ofSeconds(30));
    }
    assertThat(boxd.tokenExchanges).hasValue(1);
  }
}
