package dev.sandbox4j.workspace;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/** UTF-8 decoding that never throws: invalid input becomes U+FFFD. */
final class Texts {
  private static final int PREVIEW_BYTES = 200;

  private Texts() {}

  static String decode(byte[] bytes) {
    try {
      return StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPLACE)
          .onUnmappableCharacter(CodingErrorAction.REPLACE)
          .decode(ByteBuffer.wrap(bytes))
          .toString();
    } catch (CharacterCodingException e) {
      throw new AssertionError("REPLACE decoding cannot fail", e);
    }
  }

  static String preview(byte[] bytes) {
    if (bytes.length <= PREVIEW_BYTES) {
      return '"' + decode(bytes) + '"';
    }
    byte[] head = java.util.Arrays.copyOf(bytes, PREVIEW_BYTES);
    return '"' + decode(head) + "\"... (" + bytes.length + " bytes)";
  }
}
