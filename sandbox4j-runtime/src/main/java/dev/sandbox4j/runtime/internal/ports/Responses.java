package dev.sandbox4j.runtime.internal.ports;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/** The proxy's own answers: a status and one line of plain text, then the connection closes. */
final class Responses {
  private Responses() {}

  static void respond(OutputStream out, int status, String text) throws IOException {
    byte[] body = (text + "\n").getBytes(StandardCharsets.UTF_8);
    String head =
        "HTTP/1.1 "
            + status
            + " "
            + reason(status)
            + (status == 401 ? "\r\nWWW-Authenticate: " + PortTokens.TOKEN_HEADER : "")
            + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
            + body.length
            + "\r\nConnection: close\r\n\r\n";
    out.write(head.getBytes(StandardCharsets.US_ASCII));
    out.write(body);
    out.flush();
  }

  private static String reason(int status) {
    return switch (status) {
      case 400 -> "Bad Request";
      case 401 -> "Unauthorized";
      case 404 -> "Not Found";
      case 408 -> "Request Timeout";
      case 431 -> "Request Header Fields Too Large";
      case 502 -> "Bad Gateway";
      default -> "Error";
    };
  }

  /** Up to 60 printable ASCII characters of {@code s}, for an error message. */
  static String printable(String s) {
    StringBuilder b = new StringBuilder();
    s.chars().limit(60).forEach(c -> b.append(c >= 0x20 && c < 0x7f ? (char) c : '?'));
    return b.toString();
  }
}
