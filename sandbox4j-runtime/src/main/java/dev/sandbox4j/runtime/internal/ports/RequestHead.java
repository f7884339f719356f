package dev.sandbox4j.runtime.internal.ports;

import java.io.IOException;
import java.io.OutputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

/** A request head: its line and headers, as the port proxy checks, strips and forwards them. */
final class RequestHead {
  private static final Pattern TOKEN_CHARS = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");
  private static final Pattern VERSION = Pattern.compile("HTTP/1\\.[01]");

  private final String method;
  private String target;
  private final String version;
  private final List<String[]> headers; // name as sent, value

  private RequestHead(String method, String target, String version, List<String[]> headers) {
    this.method = method;
    this.target = target;
    this.version = version;
    this.headers = headers;
  }

  static RequestHead parse(String text) throws BadRequest {
    String[] lines = text.split("\r\n", -1);
    String[] requestLine = lines[0].split(" ", -1);
    if (requestLine.length != 3
        || !TOKEN_CHARS.matcher(requestLine[0]).matches()
        || !VERSION.matcher(requestLine[2]).matches()) {
      throw new BadRequest(400, "bad request line: expected METHOD /path HTTP/1.1");
    }
    if (!requestLine[1].startsWith("/")
        || requestLine[1].chars().anyMatch(c -> c <= 0x20 || c >= 0x7f)) {
      throw new BadRequest(400, "bad request target: expected a path starting with /");
    }
    List<String[]> headers = new ArrayList<>();
    for (int i = 1; i < lines.length; i++) {
      String line = lines[i];
      int colon = line.indexOf(':');
      if (colon <= 0 || !TOKEN_CHARS.matcher(line.substring(0, colon)).matches()) {
        throw new BadRequest(400, "bad header line " + i + " (folded, or no name)");
      }
      String value = line.substring(colon + 1).strip();
      if (value.chars().anyMatch(c -> c < 0x20 && c != '\t' || c == 0x7f)) {
        throw new BadRequest(400, "bad header value of " + line.substring(0, colon));
      }
      headers.add(new String[] {line.substring(0, colon), value});
    }
    return new RequestHead(requestLine[0], requestLine[1], requestLine[2], headers);
  }

  List<String> values(String lowerName) {
    return headers.stream()
        .filter(h -> h[0].toLowerCase(Locale.ROOT).equals(lowerName))
        .map(h -> h[1])
        .toList();
  }

  void removeHeader(String lowerName) {
    headers.removeIf(h -> h[0].toLowerCase(Locale.ROOT).equals(lowerName));
  }

  /** Removes every {@code name=value} from the query; returns the (percent-decoded) values. */
  List<String> removeQueryParameter(String name) throws BadRequest {
    int q = target.indexOf('?');
    if (q < 0) {
      return List.of();
    }
    List<String> values = new ArrayList<>();
    List<String> kept = new ArrayList<>();
    for (String pair : target.substring(q + 1).split("&", -1)) {
      int eq = pair.indexOf('=');
      String key = eq < 0 ? pair : pair.substring(0, eq);
      if (key.equals(name)) {
        try {
          values.add(
              URLDecoder.decode(eq < 0 ? "" : pair.substring(eq + 1), StandardCharsets.UTF_8));
        } catch (IllegalArgumentException e) {
          throw new BadRequest(400, "bad " + name + " in the query");
        }
      } else {
        kept.add(pair);
      }
    }
    if (!values.isEmpty()) {
      target = target.substring(0, q) + (kept.isEmpty() ? "" : "?" + String.join("&", kept));
    }
    return values;
  }

  /**
   * Refuses bodies whose end the proxy could not find the same way as the server (request
   * smuggling): both Content-Length and Transfer-Encoding, differing lengths, or a transfer coding
   * other than chunked last.
   */
  void checkFraming() throws BadRequest {
    List<String> te = values("transfer-encoding");
    List<String> cl = values("content-length");
    if (!te.isEmpty() && !cl.isEmpty()) {
      throw new BadRequest(400, "both Content-Length and Transfer-Encoding");
    }
    if (!te.isEmpty()) {
      String codings = String.join(",", te).toLowerCase(Locale.ROOT).replace(" ", "");
      if (!codings.equals("chunked")) {
        throw new BadRequest(
            400, "unsupported Transfer-Encoding '" + Responses.printable(codings) + "'");
      }
    }
    if (cl.stream().distinct().count() > 1) {
      throw new BadRequest(400, "conflicting Content-Length headers");
    }
    if (!cl.isEmpty() && !cl.get(0).matches("[0-9]{1,18}")) {
      throw new BadRequest(400, "bad Content-Length '" + Responses.printable(cl.get(0)) + "'");
    }
  }

  /** Whether the request asks to switch protocols (WebSocket, h2c). */
  boolean isUpgrade() {
    return !values("upgrade").isEmpty()
        && values("connection").stream()
            .anyMatch(v -> v.toLowerCase(Locale.ROOT).contains("upgrade"));
  }

  /** Copies the request's body, as framed by its headers, from {@code in} to {@code out}. */
  void copyBody(ClientInput in, OutputStream out) throws IOException, BadRequest {
    if (!values("transfer-encoding").isEmpty()) {
      while (true) {
        String line = in.copyLine(out);
        String size = line.split(";", 2)[0].strip();
        if (!size.matches("[0-9a-fA-F]{1,15}")) {
          throw new BadRequest(400, "bad chunk size");
        }
        long n = Long.parseLong(size, 16);
        if (n == 0) {
          while (!in.copyLine(out).isEmpty()) {
            // trailer fields, copied on
          }
          return;
        }
        in.copy(n + 2, out); // the chunk and its CRLF
      }
    }
    List<String> cl = values("content-length");
    if (!cl.isEmpty()) {
      in.copy(Long.parseLong(cl.get(0)), out);
    }
  }

  /** The head as forwarded. */
  byte[] bytes() {
    StringBuilder b = new StringBuilder();
    b.append(method).append(' ').append(target).append(' ').append(version).append("\r\n");
    for (String[] h : headers) {
      b.append(h[0]).append(": ").append(h[1]).append("\r\n");
    }
    b.append("\r\n");
    return b.toString().getBytes(StandardCharsets.ISO_8859_1);
  }
}
