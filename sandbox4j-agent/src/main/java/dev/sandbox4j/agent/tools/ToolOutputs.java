package dev.sandbox4j.agent.tools;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Formatting shared by the tools: labelled command output, truncation markers, durations. */
final class ToolOutputs {

  private ToolOutputs() {}

  /**
   * {@code [stdout]} and {@code [stderr]} sections, only the non-empty ones, each without its final
   * newline; empty when both streams are.
   */
  static String sections(String stdout, String stderr) {
    List<String> parts = new ArrayList<>();
    if (!stdout.isEmpty()) {
      parts.add("[stdout]\n" + stripFinalNewline(stdout));
    }
    if (!stderr.isEmpty()) {
      parts.add("[stderr]\n" + stripFinalNewline(stderr));
    }
    return String.join("\n", parts);
  }

  /**
   * {@code body} cut to its tail so that, with {@code footer} on its own line after it, the whole
   * is at most {@code maxChars}; the footer (exit code, status) always survives. When {@code body}
   * is empty, {@code emptyBody} stands in for it.
   */
  static String withFooter(String body, String emptyBody, String footer, int maxChars) {
    String shown = body.isEmpty() ? emptyBody : body;
    if (footer.isEmpty()) {
      return truncateTail(shown, maxChars);
    }
    int room = Math.max(0, maxChars - footer.length() - 1);
    return truncateTail(shown, room) + "\n" + footer;
  }

  /**
   * The last characters of {@code text} under a marker that says how many were cut, the whole at
   * most {@code maxChars}; {@code text} itself if it fits.
   */
  static String truncateTail(String text, int maxChars) {
    if (text.length() <= maxChars) {
      return text;
    }
    // the marker's length depends on the numbers in it: size it for the widest case first
    int kept = Math.max(0, maxChars - marker(text.length(), maxChars).length());
    String marker = marker(text.length() - kept, kept);
    if (marker.length() + kept > maxChars) {
      kept = Math.max(0, maxChars - marker.length());
      marker = marker(text.length() - kept, kept);
    }
    if (marker.length() > maxChars) {
      return text.substring(text.length() - maxChars);
    }
    return marker + text.substring(text.length() - kept);
  }

  private static String marker(int cut, int kept) {
    return "[... output truncated: the first "
        + cut
        + " chars were cut, showing the last "
        + kept
        + " chars]\n";
  }

  /**
   * The first and last characters of {@code text} with a marker in between saying how many were
   * left out, the whole at most {@code maxChars} (for outputs where both ends matter).
   */
  static String truncateMiddle(String text, int maxChars) {
    if (text.length() <= maxChars) {
      return text;
    }
    String probe = middleMarker(text.length());
    int room = Math.max(0, maxChars - probe.length());
    int head = room / 2;
    int tail = room - head;
    return text.substring(0, head)
        + middleMarker(text.length() - head - tail)
        + text.substring(text.length() - tail);
  }

  private static String middleMarker(int omitted) {
    return "\n[... " + omitted + " chars of this tool output omitted ...]\n";
  }

  /** "30s", "1.5s", "0.25s": seconds as the model wrote them. */
  static String seconds(Duration duration) {
    long millis = duration.toMillis();
    if (millis % 1000 == 0) {
      return millis / 1000 + "s";
    }
    String text = String.format(java.util.Locale.ROOT, "%.3f", millis / 1000.0);
    text = text.replaceAll("0+$", "");
    return text + "s";
  }

  /** A timeout in seconds from the model, checked. */
  static Duration timeout(Double seconds, Duration fallback, double max, String argument) {
    if (seconds == null) {
      return fallback;
    }
    if (seconds.isNaN() || seconds <= 0) {
      throw new ToolError(argument + " must be greater than zero, was " + format(seconds) + ".");
    }
    if (seconds > max) {
      throw new ToolError(
          argument + " must be at most " + format(max) + " seconds, was " + format(seconds) + ".");
    }
    return Duration.ofMillis(Math.max(1, Math.round(seconds * 1000)));
  }

  private static String format(double value) {
    return value == Math.rint(value) && !Double.isInfinite(value)
        ? Long.toString((long) value)
        : Double.toString(value);
  }

  /** Python's repr of a string, as the reference harness quotes commands and paths. */
  static String quote(String text) {
    boolean single = text.contains("'") && !text.contains("\"");
    char q = single ? '"' : '\'';
    StringBuilder out = new StringBuilder().append(q);
    for (char c : text.toCharArray()) {
      switch (c) {
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\t' -> out.append("\\t");
        case '\r' -> out.append("\\r");
        default -> {
          if (c == q) {
            out.append('\\');
          }
          out.append(c);
        }
      }
    }
    return out.append(q).toString();
  }

  private static String stripFinalNewline(String text) {
    return text.endsWith("\n") ? text.substring(0, text.length() - 1) : text;
  }

  /**
   * Decodes a byte stream arriving in chunks, keeping a UTF-8 sequence split across two chunks
   * whole. Not thread-safe: one per stream, fed in order.
   */
  static final class ChunkDecoder {
    private final CharsetDecoder decoder =
        StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPLACE)
            .onUnmappableCharacter(CodingErrorAction.REPLACE);
    private ByteBuffer pending = ByteBuffer.allocate(0);

    String decode(byte[] chunk) {
      ByteBuffer in = ByteBuffer.allocate(pending.remaining() + chunk.length);
      in.put(pending).put(chunk).flip();
      CharBuffer out = CharBuffer.allocate(in.remaining() + 1);
      decoder.decode(in, out, false);
      pending = ByteBuffer.allocate(in.remaining()).put(in).flip();
      return out.flip().toString();
    }
  }
}
