package dev.sandbox4j.cli;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Parses {@code --output-limit}: bytes, or a number with a binary unit {@code K}, {@code M} or
 * {@code G} ({@code KiB}, {@code MB} and lower case are accepted too; all mean powers of 1024).
 */
final class ByteSizeConverter implements ITypeConverter<Long> {

  private static final Pattern SIZE = Pattern.compile("(\\d{1,18})(?:([kmg])(?:i?b)?|b)?");

  @Override
  public Long convert(String text) {
    Matcher m = SIZE.matcher(text.strip().toLowerCase(Locale.ROOT));
    if (m.matches()) {
      int shift =
          m.group(2) == null
              ? 0
              : switch (m.group(2)) {
                case "k" -> 10;
                case "m" -> 20;
                default -> 30;
              };
      long n = Long.parseLong(m.group(1));
      if (n > 0 && n <= Long.MAX_VALUE >> shift) {
        return n << shift;
      }
    }
    throw new TypeConversionException(
        "invalid size '" + text + "': use a positive amount such as 10M, 512K or 1048576");
  }
}
