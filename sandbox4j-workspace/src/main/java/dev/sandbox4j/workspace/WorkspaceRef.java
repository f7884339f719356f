package dev.sandbox4j.workspace;

import java.util.regex.Pattern;

/**
 * The name of one workspace: which provider holds it and its id there.
 *
 * <p>A ref never holds credentials, so it is safe to store in message histories and databases;
 * reattaching still needs whatever the provider needs. It round-trips through {@link #toString()} /
 * {@link #parse(String)} as {@code provider:id}, and through JSON as {@code {"provider": ..., "id":
 * ...}} (a record, so Jackson and similar libraries map it without annotations).
 *
 * <p>A provider is lower-case letters, digits and {@code -}, starting with a letter. An id is 1 to
 * 256 printable ASCII characters without spaces; a provider may restrict it further.
 *
 * @param provider the provider's name, such as {@code local} or {@code host}
 * @param id the workspace's id at that provider
 */
public record WorkspaceRef(String provider, String id) {

  private static final Pattern PROVIDER = Pattern.compile("[a-z][a-z0-9-]{0,62}");
  private static final Pattern ID = Pattern.compile("[\\x21-\\x7e]{1,256}");

  /** Validates both parts. */
  public WorkspaceRef {
    if (provider == null || !PROVIDER.matcher(provider).matches()) {
      throw new IllegalArgumentException(
          "invalid workspace provider "
              + quote(provider)
              + ": expected lower-case letters, digits and '-', starting with a letter");
    }
    if (id == null || !ID.matcher(id).matches()) {
      throw new IllegalArgumentException(
          "invalid workspace id "
              + quote(id)
              + " for provider '"
              + provider
              + "': expected 1 to 256 printable ASCII characters without spaces");
    }
  }

  /**
   * Parses {@code provider:id}, the form {@link #toString()} prints. The id may itself contain
   * {@code :}; the provider ends at the first one.
   *
   * @throws IllegalArgumentException naming what is wrong with {@code text}
   */
  public static WorkspaceRef parse(String text) {
    if (text == null) {
      throw new IllegalArgumentException("workspace ref is null; expected 'provider:id'");
    }
    int colon = text.indexOf(':');
    if (colon <= 0 || colon == text.length() - 1) {
      throw new IllegalArgumentException(
          "malformed workspace ref " + quote(text) + ": expected 'provider:id', e.g. 'local:k3x9'");
    }
    return new WorkspaceRef(text.substring(0, colon), text.substring(colon + 1));
  }

  /** Returns {@code provider:id}. */
  @Override
  public String toString() {
    return provider + ":" + id;
  }

  private static String quote(String s) {
    if (s == null) {
      return "null";
    }
    String shown = s.length() > 80 ? s.substring(0, 80) + "..." : s;
    StringBuilder out = new StringBuilder("'");
    shown
        .codePoints()
        .forEach(
            c -> {
              if (c < 0x20 || c == 0x7f) {
                out.append(String.format("\\x%02x", c));
              } else {
                out.appendCodePoint(c);
              }
            });
    return out.append('\'').toString();
  }
}
