package dev.sandbox4j.agent.tools;

import java.util.regex.Pattern;

/**
 * A glob over POSIX relative paths: {@code *} and {@code ?} stay within one path segment, {@code
 * [abc]} is a character class, {@code **} spans segments ({@code **}{@code /} also matches no
 * directory at all, and a trailing {@code /**} also matches the directory itself).
 *
 * <p>A glob is either anchored (matched against the whole relative path) or, for read-only
 * patterns, a pattern without a {@code /} matches a file name at any depth, as in {@code
 * .gitignore}.
 */
final class Glob {

  private final String pattern;
  private final Pattern regex;
  private final boolean nameOnly;

  private Glob(String pattern, boolean nameAnywhere) {
    this.pattern = pattern;
    this.nameOnly = nameAnywhere && !pattern.contains("/");
    this.regex = Pattern.compile(toRegex(pattern));
  }

  /** Matched against the whole relative path. */
  static Glob anchored(String pattern) {
    return new Glob(pattern, false);
  }

  /** Matched against the whole relative path, or against the file name if it has no slash. */
  static Glob nameAnywhere(String pattern) {
    return new Glob(pattern, true);
  }

  String pattern() {
    return pattern;
  }

  /** Whether the pattern can only match paths of at most this many segments; -1 if unbounded. */
  int maxDepth() {
    if (pattern.contains("**")) {
      return -1;
    }
    return pattern.split("/", -1).length;
  }

  boolean matches(String relativePath) {
    String subject =
        nameOnly ? relativePath.substring(relativePath.lastIndexOf('/') + 1) : relativePath;
    return regex.matcher(subject).matches();
  }

  private static String toRegex(String glob) {
    StringBuilder out = new StringBuilder();
    int i = 0;
    while (i < glob.length()) {
      char c = glob.charAt(i);
      if (glob.startsWith("**/", i)) {
        out.append("(?:.*/)?");
        i += 3;
      } else if (glob.startsWith("/**", i) && i + 3 == glob.length()) {
        out.append("(?:/.*)?");
        i += 3;
      } else if (glob.startsWith("**", i)) {
        out.append(".*");
        i += 2;
      } else if (c == '*') {
        out.append("[^/]*");
        i++;
      } else if (c == '?') {
        out.append("[^/]");
        i++;
      } else if (c == '[' && glob.indexOf(']', i + 2) > 0) {
        int end = glob.indexOf(']', i + 2);
        String body = glob.substring(i + 1, end);
        if (body.startsWith("!")) {
          body = "^" + body.substring(1);
        }
        out.append('[').append(body.replace("\\", "\\\\").replace("[", "\\[")).append(']');
        i = end + 1;
      } else {
        out.append(Pattern.quote(String.valueOf(c)));
        i++;
      }
    }
    return out.toString();
  }

  @Override
  public String toString() {
    return pattern;
  }
}
