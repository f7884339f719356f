package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.WorkspaceException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads the profiles of {@code ~/.modal.toml}: the part of TOML that file uses, one table per
 * profile whose keys have basic or literal string, boolean or bare values. Anything else (arrays,
 * inline tables, multi-line strings) is refused with the line, as Modal's Go client refuses an
 * unparsable file rather than guessing.
 */
final class TomlProfiles {
  private TomlProfiles() {}

  /** Profile name to its keys, in file order; booleans and numbers are kept as their text. */
  static Map<String, Map<String, String>> parse(String source, String text) {
    Map<String, Map<String, String>> profiles = new LinkedHashMap<>();
    Map<String, String> current = null;
    String[] lines = text.split("\r?\n", -1);
    for (int n = 0; n < lines.length; n++) {
      String line = stripComment(lines[n]).strip();
      if (line.isEmpty()) {
        continue;
      }
      if (line.startsWith("[")) {
        if (!line.endsWith("]") || line.startsWith("[[")) {
          throw error(source, n, "expected a [profile] header");
        }
        String name = unquote(source, n, line.substring(1, line.length() - 1).strip());
        current = profiles.computeIfAbsent(name, k -> new LinkedHashMap<>());
        continue;
      }
      int eq = line.indexOf('=');
      if (eq <= 0 || current == null) {
        throw error(source, n, "expected key = value inside a [profile]");
      }
      String key = unquote(source, n, line.substring(0, eq).strip());
      current.put(key, unquote(source, n, line.substring(eq + 1).strip()));
    }
    return profiles;
  }

  /** Drops a {@code #} comment that is not inside a string. */
  private static String stripComment(String line) {
    char quote = 0;
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (quote != 0) {
        if (c == '\\' && quote == '"') {
          i++;
        } else if (c == quote) {
          quote = 0;
        }
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#') {
        return line.substring(0, i);
      }
    }
    return line;
  }

  private static String unquote(String source, int n, String value) {
    if (value.length() >= 2 && value.startsWith("'") && value.endsWith("'")) {
      return value.substring(1, value.length() - 1);
    }
    if (value.length() >= 2 && value.startsWith("\"") && value.endsWith("\"")) {
      StringBuilder out = new StringBuilder();
      for (int i = 1; i < value.length() - 1; i++) {
        char c = value.charAt(i);
        if (c != '\\') {
          out.append(c);
          continue;
        }
        char e = value.charAt(++i);
        switch (e) {
          case 'n' -> out.append('\n');
          case 't' -> out.append('\t');
          case 'r' -> out.append('\r');
          case '"', '\\' -> out.append(e);
          case 'u' -> {
            out.append((char) Integer.parseInt(value.substring(i + 1, i + 5), 16));
            i += 4;
          }
          default -> throw error(source, n, "unsupported escape \\" + e);
        }
      }
      return out.toString();
    }
    if (value.startsWith("[") || value.startsWith("{") || value.startsWith("\"\"\"")) {
      throw error(source, n, "arrays, inline tables and multi-line strings are not supported");
    }
    return value; // a bare key, a boolean or a number
  }

  private static WorkspaceException error(String source, int n, String what) {
    return new WorkspaceException(
        "cannot parse the Modal config " + source + " line " + (n + 1) + ": " + what);
  }
}
