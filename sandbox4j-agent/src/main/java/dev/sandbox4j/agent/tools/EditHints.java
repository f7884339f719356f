package dev.sandbox4j.agent.tools;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/** What an edit_file error shows the model so that its next old_text matches. */
final class EditHints {

  private static final Pattern LINE_NUMBER_PREFIX = Pattern.compile("(?m)^\\s*\\d+\\t");
  private static final double SIMILAR = 0.6;

  private EditHints() {}

  /** Why old_text may have missed, and the file's closest line; always ends with what to do. */
  static String closest(String text, FileSystem.EditFileArgs args) {
    String old = args.oldText();
    StringBuilder hint = new StringBuilder();
    List<String> lines = FileTools.lines(text);
    String firstLine =
        old.lines().map(String::strip).filter(l -> !l.isEmpty()).findFirst().orElse("");
    if (LINE_NUMBER_PREFIX.matcher(old).find() && !LINE_NUMBER_PREFIX.matcher(text).find()) {
      hint.append("old_text seems to include read_file's line-number prefixes; leave them out. ");
    } else if (!firstLine.isEmpty() && squeeze(text).contains(squeeze(old))) {
      int at = lineOf(lines, firstLine);
      hint.append("old_text matches when whitespace is ignored")
          .append(at > 0 ? " (from line " + at + ")" : "")
          .append(": copy the exact indentation and line breaks. ");
    } else if (!firstLine.isEmpty()) {
      int best = -1;
      double bestScore = 0;
      for (int i = 0; i < lines.size(); i++) {
        double score = similarity(firstLine, lines.get(i).strip());
        if (score > bestScore) {
          bestScore = score;
          best = i;
        }
      }
      if (best >= 0 && bestScore >= SIMILAR) {
        String line = lines.get(best);
        hint.append("The closest line to the start of old_text is line ")
            .append(best + 1)
            .append(": ")
            .append(ToolOutputs.quote(line.length() > 200 ? line.substring(0, 200) + "…" : line))
            .append(". ");
      }
    }
    return hint.append(
            "Re-read the file with read_file and copy old_text exactly as it is now. Nothing was"
                + " changed.")
        .toString();
  }

  /** The 1-based line numbers where {@code part} starts, at most {@code max}, comma-separated. */
  static String lineNumbers(String text, String part, int max) {
    List<String> numbers = new ArrayList<>();
    int line = 1;
    int scanned = 0;
    for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + part.length())) {
      for (int i = scanned; i < at; i++) {
        if (text.charAt(i) == '\n') {
          line++;
        }
      }
      scanned = at;
      if (numbers.size() == max) {
        numbers.add("…");
        break;
      }
      numbers.add(Integer.toString(line));
    }
    return String.join(", ", numbers);
  }

  private static int lineOf(List<String> lines, String stripped) {
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).strip().equals(stripped)) {
        return i + 1;
      }
    }
    return -1;
  }

  private static String squeeze(String text) {
    return text.replaceAll("\\s+", " ").strip();
  }

  /** Dice coefficient of character bigrams: 1 for equal strings, 0 for nothing in common. */
  static double similarity(String a, String b) {
    if (a.equals(b)) {
      return 1;
    }
    if (a.length() < 2 || b.length() < 2) {
      return 0;
    }
    Map<String, Integer> bigrams = new HashMap<>();
    for (int i = 0; i < a.length() - 1; i++) {
      bigrams.merge(a.substring(i, i + 2), 1, Integer::sum);
    }
    int common = 0;
    for (int i = 0; i < b.length() - 1; i++) {
      String bigram = b.substring(i, i + 2);
      Integer n = bigrams.get(bigram);
      if (n != null && n > 0) {
        common++;
        bigrams.put(bigram, n - 1);
      }
    }
    return 2.0 * common / (a.length() - 1 + b.length() - 1);
  }
}
