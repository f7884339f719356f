package dev.sandbox4j.runtime.internal.egress;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/** The proxy's own answers to a client: a status and one line of plain text. */
final class Replies {
  private Replies() {}

  /** Answers with a short plain-text body and {@code Connection: close}. */
  static void respond(OutputStream out, int status, String message) {
    byte[] body = (message + "\n").getBytes(StandardCharsets.UTF_8);
    String head =
        "HTTP/1.1 "
            + status
            + " "
            + reason(status)
            + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
            + body.length
            + "\r\nConnection: close\r\n\r\n";
    try {
      out.write(head.getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
    } catch (IOException e) {
      // the client left: nobody to tell
    }
  }

  private static String reason(int status) {
    return switch (status) {
      case 400 -> "Bad Request";
      case 403 -> "Forbidden";
      case 421 -> "Misdirected Request";
      case 431 -> "Request Header Fields Too Large";
      case 500 -> "Internal Server Error";
      case 501 -> "Not Implemented";
      case 502 -> "Bad Gateway";
      case 503 -> "Service Unavailable";
      case 504 -> "Gateway Timeout";
      case 505 -> "HTTP Version Not Supported";
      default -> "Error";
    };
  }

  static void writeAscii(OutputStream out, String s) throws IOException {
    out.write(s.getBytes(StandardCharsets.US_ASCII));
  }
}
