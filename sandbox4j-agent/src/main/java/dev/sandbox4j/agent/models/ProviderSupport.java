package dev.sandbox4j.agent.models;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.agent.ModelException;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * What the provider adapters share and that needs no provider SDK: JSON of tool arguments, key
 * lookup and redaction, and the wording of failures. It must not touch an SDK class, since {@link
 * Models} uses it while checking whether the SDK is there at all.
 */
final class ProviderSupport {

  static final ObjectMapper JSON = new ObjectMapper();

  /**
   * API keys as providers write them ({@code sk-ant-api03-…}, {@code sk-proj-…}). Error bodies
   * sometimes echo part of a rejected key; even a masked one is cut out of our messages.
   */
  private static final Pattern KEY_LIKE = Pattern.compile("sk-[A-Za-z0-9_\\-*]{4,}");

  private ProviderSupport() {}

  /**
   * The tool arguments the model wrote, as a JSON object. Arguments that are not a JSON object (a
   * model may write broken JSON; the agent then sent it a retry prompt) become an empty object,
   * since the providers accept only objects when the call is sent back in the history.
   */
  static Map<String, Object> argumentsObject(String json) {
    try {
      Map<String, Object> value = JSON.readValue(json, new TypeReference<>() {});
      return value == null ? Map.of() : value;
    } catch (JsonProcessingException e) {
      return Map.of();
    }
  }

  static String toJson(Object value) {
    try {
      return JSON.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new ModelException("could not write JSON: " + e.getOriginalMessage(), e);
    }
  }

  /** Whether one of the variables (environment, through {@code env}) or properties has a value. */
  static boolean anySet(Function<String, String> env, String variable, String property) {
    return present(env.apply(variable)) || present(System.getProperty(property));
  }

  static boolean present(String value) {
    return value != null && !value.isBlank();
  }

  /** {@code text} with {@code key} and anything shaped like an API key replaced by {@code ***}. */
  static String redact(String text, String key) {
    if (text == null) {
      return "";
    }
    String clean = present(key) ? text.replace(key, "***") : text;
    return KEY_LIKE.matcher(clean).replaceAll("sk-***");
  }

  /**
   * The failure of a request to {@code provider}: {@code "<provider>: HTTP <status> (<type>):
   * <message>"}, with what is known.
   */
  static ModelException httpFailure(
      String provider,
      int status,
      Optional<String> type,
      Optional<String> message,
      Optional<String> requestId,
      String key,
      Throwable cause) {
    StringBuilder text = new StringBuilder(provider).append(": HTTP ").append(status);
    type.filter(ProviderSupport::present).ifPresent(t -> text.append(" (").append(t).append(')'));
    text.append(": ").append(message.filter(ProviderSupport::present).orElse("no error message"));
    requestId.ifPresent(id -> text.append(" [request ").append(id).append(']'));
    return new ModelException(redact(text.toString(), key), cause);
  }

  /**
   * An SDK exception's message and its cause's: the SDKs wrap I/O failures in a generic "Request
   * failed" whose cause says what failed (refused, reset, timed out).
   */
  static String describe(Throwable e) {
    String message = e.getMessage();
    Throwable cause = e.getCause();
    String causeMessage = cause == null ? null : cause.getMessage();
    if (!present(message)) {
      message = present(causeMessage) ? causeMessage : e.getClass().getSimpleName();
    } else if (present(causeMessage) && !message.contains(causeMessage)) {
      message += " (" + causeMessage + ")";
    }
    return message;
  }

  /**
   * A failure while the thread was interrupted is the run being cancelled, not a provider problem:
   * the agent reports it as a cancellation.
   */
  static RuntimeException cancelledOr(RuntimeException failure) {
    if (Thread.currentThread().isInterrupted()) {
      CancellationException cancelled = new CancellationException("the run was cancelled");
      cancelled.initCause(failure);
      return cancelled;
    }
    return failure;
  }
}
