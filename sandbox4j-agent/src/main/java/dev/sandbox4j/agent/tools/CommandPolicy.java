package dev.sandbox4j.agent.tools;

import java.util.ArrayList;
import java.util.List;

/**
 * The allowed and denied command lists of a {@link Shell}: each entry is one or more words ({@code
 * rm}, {@code git push}) matched against the first words of every simple command in a command line
 * (the parts between {@code ;}, {@code &&}, {@code ||}, {@code |}, {@code &} and newlines), after
 * leading {@code NAME=value} assignments; a program given by path matches by its file name.
 *
 * <p>A guardrail against accidents, not a security boundary: {@code sh -c}, {@code eval}, an
 * interpreter or a script can run anything. The sandbox is the boundary.
 */
final class CommandPolicy {

  private final List<List<String>> allowed;
  private final List<List<String>> denied;

  CommandPolicy(List<String> allowed, List<String> denied) {
    this.allowed = parse(allowed);
    this.denied = parse(denied);
  }

  private static List<List<String>> parse(List<String> entries) {
    List<List<String>> out = new ArrayList<>();
    for (String entry : entries) {
      List<String> words = List.of(entry.trim().split("\\s+"));
      if (entry.isBlank()) {
        throw new IllegalArgumentException("a command list entry must not be blank");
      }
      out.add(words);
    }
    return List.copyOf(out);
  }

  /**
   * @throws ToolError naming the first command the lists refuse
   */
  void check(String commandLine) {
    if (allowed.isEmpty() && denied.isEmpty()) {
      return;
    }
    for (List<String> words : simpleCommands(commandLine)) {
      if (words.isEmpty()) {
        continue;
      }
      for (List<String> entry : denied) {
        if (startsWith(words, entry)) {
          throw new ToolError(
              "Command "
                  + ToolOutputs.quote(String.join(" ", entry))
                  + " is denied; it was not run. Denied commands: "
                  + describe(denied)
                  + ".");
        }
      }
      if (!allowed.isEmpty() && allowed.stream().noneMatch(entry -> startsWith(words, entry))) {
        throw new ToolError(
            "Command "
                + ToolOutputs.quote(words.getFirst())
                + " is not in the allowed list; it was not run. Allowed commands: "
                + describe(allowed)
                + ".");
      }
    }
  }

  private static String describe(List<List<String>> entries) {
    return String.join(", ", entries.stream().map(e -> String.join(" ", e)).toList());
  }

  private static boolean startsWith(List<String> words, List<String> entry) {
    if (words.size() < entry.size()) {
      return false;
    }
    for (int i = 0; i < entry.size(); i++) {
      String word = words.get(i);
      if (i == 0) {
        word = word.substring(word.lastIndexOf('/') + 1);
      }
      if (!word.equals(entry.get(i))) {
        return false;
      }
    }
    return true;
  }

  /** The words of each simple command, quotes removed; a best effort, not a shell parser. */
  static List<List<String>> simpleCommands(String line) {
    List<List<String>> commands = new ArrayList<>();
    List<String> words = new ArrayList<>();
    StringBuilder word = null;
    char quote = 0;
    for (int i = 0; i < line.length(); i++) {
      char c = line.charAt(i);
      if (quote != 0) {
        if (c == quote) {
          quote = 0;
        } else if (c == '\\' && quote == '"' && i + 1 < line.length()) {
          word.append(line.charAt(++i));
        } else {
          word.append(c);
        }
        continue;
      }
      switch (c) {
        case '\'', '"' -> {
          quote = c;
          word = word == null ? new StringBuilder() : word;
        }
        case '\\' -> {
          word = word == null ? new StringBuilder() : word;
          if (i + 1 < line.length()) {
            word.append(line.charAt(++i));
          }
        }
        case ' ', '\t' -> {
          word = flush(word, words);
        }
        case ';', '&', '|', '\n', '(', ')' -> {
          word = flush(word, words);
          commands.add(withoutAssignments(words));
          words = new ArrayList<>();
        }
        default -> {
          word = word == null ? new StringBuilder() : word;
          word.append(c);
        }
      }
    }
    flush(word, words);
    commands.add(withoutAssignments(words));
    return commands;
  }

  private static StringBuilder flush(StringBuilder word, List<String> words) {
    if (word != null) {
      words.add(word.toString());
    }
    return null;
  }

  private static final List<String> PREFIXES =
      List.of("exec", "command", "nohup", "time", "env", "sudo", "!", "{", "then", "do", "else");

  private static List<String> withoutAssignments(List<String> words) {
    List<String> rest = words;
    while (!rest.isEmpty()) {
      String first = rest.getFirst();
      if (first.matches("[A-Za-z_][A-Za-z0-9_]*=.*") || PREFIXES.contains(first)) {
        rest = rest.subList(1, rest.size()); // runs the words after it as the command
      } else {
        break;
      }
    }
    return List.copyOf(rest);
  }
}
