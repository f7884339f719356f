package dev.sandbox4j.cli;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Parses {@code --timeout}: a number with a unit ({@code 500ms}, {@code 30s}, {@code 1.5s}, {@code
 * 2m}, {@code 1h}, {@code 1d}), a bare number of seconds as GNU {@code timeout} takes, or ISO-8601
 * ({@code PT30S}). Must be positive.
 */
final class DurationConverter implements ITypeConverter<Duration> {

  private static final Pattern AMOUNT = Pattern.compile("(\\d+(?:\\.\\d+)?)(ms|s|m|h|d)?");

  @Override
  public Duration convert(String text) {
    Duration d = parseOrNull(text.strip());
    if (d == null || d.isZero() || d.isNegative()) {
      throw new TypeConversionException(
          "invalid duration '" + text + "': use a positive amount such as 30s, 500ms, 2m or PT30S");
    }
    return d;
  }

  private static Duration parseOrNull(String text) {
    if (text.toUpperCase(Locale.ROOT).startsWith("P")) {
      try {
        return Duration.parse(text);
      } catch (DateTimeParseException e) {
        return null;
      }
    }
    Matcher m = AMOUNT.matcher(text);
    if (!m.matches()) {
      return null;
    }
    long unitNanos =
        switch (m.group(2) == null ? "s" : m.group(2)) {
          case "ms" -> 1_000_000L;
          case "s" -> 1_000_000_000L;
          case "m" -> 60_000_000_000L;
          case "h" -> 3_600_000_000_000L;
          default -> 86_400_000_000_000L;
        };
    try {
      return Duration.ofNanos(
          new BigDecimal(m.group(1)).multiply(BigDecimal.valueOf(unitNanos)).longValueExact());
    } catch (ArithmeticException e) {
      return null; // too long, or finer than a nanosecond
    }
  }

  /** "500ms", "30s", "1.5s", "2m", "1h30m": how a message shows a duration. */
  static String describe(Duration d) {
    long millis = d.toMillis();
    if (millis < 1000) {
      return millis + "ms";
    }
    if (millis % 1000 != 0) {
      return BigDecimal.valueOf(millis, 3).stripTrailingZeros().toPlainString() + "s";
    }
    long h = d.toHours();
    int m = d.toMinutesPart();
    int s = d.toSecondsPart();
    StringBuilder out = new StringBuilder();
    if (h > 0) {
      out.append(h).append('h');
    }
    if (m > 0) {
      out.append(m).append('m');
    }
    if (s > 0) {
      out.append(s).append('s');
    }
    return out.toString();
  }
}
