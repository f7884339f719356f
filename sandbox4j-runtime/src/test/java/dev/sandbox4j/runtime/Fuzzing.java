package dev.sandbox4j.runtime;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** How fuzz tests turn an input into text, so that seed files can be plain text. */
public final class Fuzzing {
  private Fuzzing() {}

  /**
   * The input as text: read as UTF-8 (invalid bytes, overlong forms among them, become U+FFFD as in
   * any decoder the engine uses), so a seed file is the text itself; an input starting with byte
   * 0x01 is the rest as UTF-16, which reaches characters UTF-8 mutations rarely make.
   */
  public static String text(FuzzedDataProvider data) {
    byte[] b = data.consumeRemainingAsBytes();
    if (b.length > 0 && b[0] == 1) {
      return new String(Arrays.copyOfRange(b, 1, b.length), StandardCharsets.UTF_16BE);
    }
    return new String(b, StandardCharsets.UTF_8);
  }
}
