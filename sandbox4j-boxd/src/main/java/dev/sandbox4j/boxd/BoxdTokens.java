package dev.sandbox4j.boxd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;

/**
 * The bearer token every call carries. A JWT given as the credential is used as it is (it cannot be
 * renewed); an API key ({@code bxd_…}) is exchanged for a JWT by a JSON POST to the token URL, and
 * exchanged again {@link #REFRESH_BEFORE} ahead of the JWT's expiry, or at once after the service
 * refused it ({@link #evict}). The credential and the tokens never appear in a message or {@code
 * toString}. State is guarded by {@code this}; the exchange runs under the lock, so concurrent
 * first calls exchange once.
 */
final class BoxdTokens {

  /** boxd's keys start so; anything else is taken for a JWT, as boxd's Go clients do. */
  static final String KEY_PREFIX = "bxd_";

  /**
   * How long before expiry a token is renewed: boxd's clients use 30 s to 5 min; one minute keeps a
   * call that starts just before expiry from arriving with a dead token.
   */
  static final Duration REFRESH_BEFORE = Duration.ofMinutes(1);

  /** The exchange is rate-limited per source IP: a refused attempt is retried this many times. */
  private static final int EXCHANGE_RETRIES = 2;

  private static final Duration EXCHANGE_TIMEOUT = Duration.ofSeconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String credential;
  private final URI tokenUrl;
  private final Clock clock;
  private HttpClient http;
  private String token;
  private Instant expires;

  BoxdTokens(String credential, URI tokenUrl, Clock clock) {
    this.credential = credential;
    this.tokenUrl = tokenUrl;
    this.clock = clock;
  }

  /** Whether the credential is an API key, which this class can exchange again. */
  boolean renewable() {
    return credential.startsWith(KEY_PREFIX);
  }

  /** The token to send now, exchanging the key first if there is none or it is about to expire. */
  synchronized String token() {
    if (!renewable()) {
      return credential;
    }
    if (token == null || !clock.instant().isBefore(expires.minus(REFRESH_BEFORE))) {
      exchange();
    }
    return token;
  }

  /** Forgets {@code refused}, which the service rejected: the next call exchanges the key again. */
  synchronized void evict(String refused) {
    if (refused.equals(token)) {
      token = null;
    }
  }

  private void exchange() {
    String body = JSON.createObjectNode().put("api_key", credential).toString();
    HttpRequest request =
        HttpRequest.newBuilder(tokenUrl)
            .timeout(EXCHANGE_TIMEOUT)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
    HttpResponse<String> response = null;
    for (int attempt = 0; ; attempt++) {
      try {
        response = http().send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
      } catch (IOException e) {
        if (attempt < EXCHANGE_RETRIES) {
          Backoff.sleep(attempt);
          continue;
        }
        throw new WorkspaceException(
            "could not reach boxd's token endpoint " + tokenUrl + ": " + e, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.util.concurrent.CancellationException(
            "interrupted exchanging the boxd API key");
      }
      int status = response.statusCode();
      if ((status == 429 || status >= 500) && attempt < EXCHANGE_RETRIES) {
        Backoff.sleep(attempt);
        continue;
      }
      break;
    }
    int status = response.statusCode();
    if (status == 401 || status == 403) {
      throw new WorkspaceException(
          "boxd refused the API key (HTTP "
              + status
              + " from "
              + tokenUrl
              + "): check BOXD_API_KEY");
    }
    if (status / 100 != 2) {
      throw new WorkspaceException(
          "boxd's token endpoint "
              + tokenUrl
              + " answered HTTP "
              + status
              + ": "
              + shorten(response.body()));
    }
    JsonNode answer;
    try {
      answer = JSON.readTree(response.body());
    } catch (IOException e) {
      throw new WorkspaceException("boxd's token endpoint answered something other than JSON", e);
    }
    String jwt = answer.path("token").asText("");
    long expiresAt = answer.path("expires_at").asLong(0);
    if (jwt.isEmpty() || expiresAt <= 0) {
      throw new WorkspaceException(
          "boxd's token endpoint answered without a token or an expiry (fields token, expires_at)");
    }
    token = jwt;
    expires = Instant.ofEpochSecond(expiresAt);
  }

  private synchronized HttpClient http() {
    if (http == null) {
      http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    }
    return http;
  }

  private static String shorten(String body) {
    return body.length() > 200 ? body.substring(0, 200) + "…" : body;
  }

  @Override
  public String toString() {
    return "BoxdTokens[" + (renewable() ? "API key via " + tokenUrl : "token") + "]";
  }
}
