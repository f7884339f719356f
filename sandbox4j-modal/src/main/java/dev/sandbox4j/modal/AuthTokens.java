package dev.sandbox4j.modal;

import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Base64;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The short-lived token Modal's control plane wants in {@code x-modal-auth-token}, fetched with
 * {@code AuthTokenGet} on first use and fetched again once it is within {@link #REFRESH_WINDOW} of
 * the expiry its JWT payload states (a token without {@code exp} is taken to last {@link
 * #ASSUMED_LIFETIME}), as libmodal does. Thread-safe: one fetch at a time, under {@code this}.
 */
final class AuthTokens {
  static final Duration REFRESH_WINDOW = Duration.ofMinutes(5);
  static final Duration ASSUMED_LIFETIME = Duration.ofMinutes(20);
  private static final Pattern EXP = Pattern.compile("\"exp\"\\s*:\\s*(\\d+)");

  private final Supplier<String> fetch;
  private final Clock clock;
  private String token;
  private Instant expiry = Instant.MIN;

  AuthTokens(Supplier<String> fetch, Clock clock) {
    this.fetch = fetch;
    this.clock = clock;
  }

  /** A token valid for more than the refresh window, fetched if the current one is not. */
  synchronized String current() {
    Instant now = clock.instant();
    if (token == null || !now.plus(REFRESH_WINDOW).isBefore(expiry)) {
      String fresh = fetch.get();
      if (fresh == null || fresh.isEmpty()) {
        throw new IllegalStateException("Modal returned an empty auth token");
      }
      token = fresh;
      expiry = expiry(fresh).orElse(now.plus(ASSUMED_LIFETIME));
    }
    return token;
  }

  /** Forgets {@code rejected} (the server refused it), so that the next call fetches another. */
  synchronized void invalidate(String rejected) {
    if (rejected != null && rejected.equals(token)) {
      token = null;
    }
  }

  /** The {@code exp} claim of a JWT ({@code header.payload.signature}), if it has one. */
  static java.util.Optional<Instant> expiry(String jwt) {
    String[] parts = jwt.split("\\.");
    if (parts.length != 3) {
      return java.util.Optional.empty();
    }
    String payload;
    try {
      payload = new String(Base64.getUrlDecoder().decode(parts[1]), StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      return java.util.Optional.empty();
    }
    Matcher m = EXP.matcher(payload);
    return m.find()
        ? java.util.Optional.of(Instant.ofEpochSecond(Long.parseLong(m.group(1))))
        : java.util.Optional.empty();
  }
}
