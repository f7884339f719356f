package dev.sandbox4j.runtime.internal.http;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The HTTP/1.1 framing the egress proxy needs, strict and bounded: a buffered reader over one
 * socket that reads message heads within a size, count and time limit, and copies bodies framed by
 * Content-Length, chunked encoding or the end of the stream. Input comes from a hostile peer, so
 * every malformed byte is a {@link Malformed} with the status to answer, never a guess.
 */
public final class HttpWire extends InputStream {
  public static final int MAX_HEAD_BYTES = 32 * 1024;
  public static final int MAX_HEADERS = 100;
  private static final int MAX_CHUNK_LINE = 4 * 1024;

  /** A message the peer got wrong, and the status that says so. */
  public static final class Malformed extends Exception {
    public final int status;

    public Malformed(int status, String message) {
      super(message);
      this.status = status;
    }
  }

  /** A start line and its header fields, in order, names as sent. */
  public record Head(String startLine, List<String[]> fields) {
    /** The value of the single field {@code name}; null if absent. */
    public String get(String name) {
      for (String[] f : fields) {
        if (f[0].equalsIgnoreCase(name)) {
          return f[1];
        }
      }
      return null;
    }

    public List<String> all(String name) {
      List<String> out = new ArrayList<>();
      for (String[] f : fields) {
        if (f[0].equalsIgnoreCase(name)) {
          out.add(f[1]);
        }
      }
      return out;
    }

    /** Whether a comma-separated field (Connection, ...) lists {@code token}. */
    public boolean hasToken(String name, String token) {
      for (String v : all(name)) {
        for (String t : v.split(",")) {
          if (t.strip().equalsIgnoreCase(token)) {
            return true;
          }
        }
      }
      return false;
    }
  }

  /** How a body ends. */
  public sealed interface Framing {
    record None() implements Framing {}

    record Length(long bytes) implements Framing {}

    record Chunked() implements Framing {}

    record UntilClose() implements Framing {}
  }

  static final Framing NONE = new Framing.None();

  private final Socket socket;
  private final InputStream in;
  private final int idleMillis;
  private final byte[] buf = new byte[16 * 1024];
  private int pos;
  private int lim;

  /**
   * A wire over {@code socket}; reads of bodies wait at most {@code idleMillis} for a byte, heads
   * until their deadline.
   */
  public HttpWire(Socket socket, int idleMillis) throws IOException {
    this.socket = socket;
    this.in = socket.getInputStream();
    this.idleMillis = idleMillis;
  }

  /** Bytes already read from the socket but not yet consumed. */
  public byte[] buffered() {
    byte[] out = java.util.Arrays.copyOfRange(buf, pos, lim);
    pos = lim;
    return out;
  }

  /**
   * Reads one head, finished by {@code deadline} (System.nanoTime) however slowly the peer sends.
   *
   * @return null if the stream ended cleanly before any byte of a head
   */
  public Head readHead(long deadline) throws IOException, Malformed {
    int total = 0;
    String start = null;
    List<String[]> fields = new ArrayList<>();
    StringBuilder line = new StringBuilder();
    while (true) {
      line.setLength(0);
      int read = readLine(line, MAX_HEAD_BYTES - total, deadline);
      if (read < 0) {
        if (start == null && total == 0) {
          return null;
        }
        throw new Malformed(400, "the message head ended early");
      }
      total += read;
      if (start == null) {
        if (line.isEmpty() && total <= 2) {
          continue; // RFC 9112 2.2: ignore an empty line before the request line
        }
        start = line.toString();
        continue;
      }
      if (line.isEmpty()) {
        return new Head(start, fields);
      }
      char c0 = line.charAt(0);
      if (c0 == ' ' || c0 == '\t') {
        throw new Malformed(400, "folded header lines are not accepted");
      }
      int colon = line.indexOf(":");
      if (colon <= 0) {
        throw new Malformed(400, "a header line has no name");
      }
      String name = line.substring(0, colon);
      if (!isToken(name)) {
        throw new Malformed(400, "header name '" + printable(name) + "' is not a token");
      }
      String value = line.substring(colon + 1).strip();
      if (fields.size() >= MAX_HEADERS) {
        throw new Malformed(431, "more than " + MAX_HEADERS + " header fields");
      }
      fields.add(new String[] {name, value});
    }
  }

  /**
   * Reads a line (CRLF or LF) into {@code out}, at most {@code max} bytes with its end.
   *
   * @return the bytes consumed, or -1 at the end of the stream
   */
  private int readLine(StringBuilder out, int max, long deadline) throws IOException, Malformed {
    int n = 0;
    while (true) {
      if (pos == lim && !fill(deadline)) {
        return -1;
      }
      byte b = buf[pos++];
      n++;
      if (n > max) {
        throw new Malformed(431, "the message head is larger than " + MAX_HEAD_BYTES + " bytes");
      }
      if (b == '\n') {
        int len = out.length();
        if (len > 0 && out.charAt(len - 1) == '\r') {
          out.setLength(len - 1);
        }
        return n;
      }
      if (b == 0) {
        throw new Malformed(400, "a NUL byte in the message head");
      }
      if (!out.isEmpty() && out.charAt(out.length() - 1) == '\r') {
        throw new Malformed(400, "a bare CR in the message head");
      }
      out.append((char) (b & 0xff));
    }
  }

  /** Refills the buffer, waiting until {@code deadline} at most; false at the end of the stream. */
  private boolean fill(long deadline) throws IOException {
    if (deadline != 0) {
      long left = (deadline - System.nanoTime()) / 1_000_000;
      if (left <= 0) {
        throw new SocketTimeoutException("the peer was too slow to send a message head");
      }
      socket.setSoTimeout((int) Math.min(idleMillis, Math.max(1, left)));
    } else {
      socket.setSoTimeout(idleMillis);
    }
    int r = in.read(buf, 0, buf.length);
    if (r < 0) {
      return false;
    }
    pos = 0;
    lim = r;
    return true;
  }

  @Override
  public int read() throws IOException {
    if (pos == lim && !fill(0)) {
      return -1;
    }
    return buf[pos++] & 0xff;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (len == 0) {
      return 0;
    }
    if (pos < lim) {
      int n = Math.min(len, lim - pos);
      System.arraycopy(buf, pos, b, off, n);
      pos += n;
      return n;
    }
    socket.setSoTimeout(idleMillis);
    return in.read(b, off, len);
  }

  @Override
  public int available() {
    return lim - pos;
  }

  /**
   * Copies one body framed by {@code framing} from this wire to {@code out} (chunked stays chunked,
   * trailers included).
   *
   * @throws Malformed if the chunked framing is broken
   * @throws java.io.EOFException if the stream ends inside the body
   */
  public void copyBody(Framing framing, OutputStream out, byte[] scratch)
      throws IOException, Malformed {
    switch (framing) {
      case Framing.None n -> {}
      case Framing.Length l -> copyExactly(l.bytes(), out, scratch);
      case Framing.UntilClose u -> {
        int r;
        while ((r = read(scratch, 0, scratch.length)) > 0) {
          out.write(scratch, 0, r);
          flushIfDry(out);
        }
      }
      case Framing.Chunked c -> {
        StringBuilder line = new StringBuilder();
        while (true) {
          line.setLength(0);
          if (readLine(line, MAX_CHUNK_LINE, 0) < 0) {
            throw new java.io.EOFException("the stream ended inside a chunked body");
          }
          String size = line.toString();
          int semi = size.indexOf(';');
          String hex = (semi < 0 ? size : size.substring(0, semi)).strip();
          if (hex.isEmpty() || hex.length() > 15 || !hex.matches("[0-9a-fA-F]+")) {
            throw new Malformed(400, "a chunk size is not hexadecimal");
          }
          long n = Long.parseLong(hex, 16);
          out.write((Long.toHexString(n) + "\r\n").getBytes(StandardCharsets.US_ASCII));
          if (n == 0) {
            break;
          }
          copyExactly(n, out, scratch);
          line.setLength(0);
          if (readLine(line, 2, 0) < 0 || !line.isEmpty()) {
            throw new Malformed(400, "a chunk does not end with CRLF");
          }
          out.write('\r');
          out.write('\n');
          flushIfDry(out);
        }
        int total = 0;
        while (true) { // trailer fields, then the empty line
          line.setLength(0);
          int r = readLine(line, MAX_HEAD_BYTES - total, 0);
          if (r < 0) {
            throw new java.io.EOFException("the stream ended inside the chunked trailer");
          }
          total += r;
          out.write((line + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
          if (line.isEmpty()) {
            break;
          }
        }
      }
    }
  }

  private void copyExactly(long bytes, OutputStream out, byte[] scratch) throws IOException {
    long left = bytes;
    while (left > 0) {
      int r = read(scratch, 0, (int) Math.min(scratch.length, left));
      if (r < 0) {
        throw new java.io.EOFException("the stream ended " + left + " bytes before the body did");
      }
      out.write(scratch, 0, r);
      left -= r;
      flushIfDry(out);
    }
  }

  /**
   * Flushes when nothing more is buffered here: a stream (server-sent events, a model's tokens)
   * must reach the other side as it comes, not when a buffer fills.
   */
  private void flushIfDry(OutputStream out) throws IOException {
    if (pos == lim) {
      out.flush();
    }
  }

  /**
   * How a request body ends (RFC 9112 6.3): chunked, a Content-Length, or none. A message with
   * both, with differing lengths, or with another transfer coding is refused: proxies that guess
   * there are how requests get smuggled.
   */
  public static Framing requestFraming(Head head) throws Malformed {
    List<String> te = head.all("Transfer-Encoding");
    List<String> cl = head.all("Content-Length");
    if (!te.isEmpty()) {
      if (!cl.isEmpty()) {
        throw new Malformed(400, "both Transfer-Encoding and Content-Length");
      }
      if (te.size() != 1 || !te.getFirst().strip().equalsIgnoreCase("chunked")) {
        throw new Malformed(501, "only Transfer-Encoding: chunked is supported");
      }
      return new Framing.Chunked();
    }
    if (!cl.isEmpty()) {
      return new Framing.Length(contentLength(cl));
    }
    return NONE;
  }

  /** How a response body ends, given the request method and the status. */
  public static Framing responseFraming(String method, int status, Head head) throws Malformed {
    if (method.equals("HEAD") || status / 100 == 1 || status == 204 || status == 304) {
      return NONE;
    }
    List<String> te = head.all("Transfer-Encoding");
    if (!te.isEmpty()) {
      String last = te.getLast();
      String[] codings = last.split(",");
      return codings[codings.length - 1].strip().equalsIgnoreCase("chunked")
          ? new Framing.Chunked()
          : new Framing.UntilClose();
    }
    List<String> cl = head.all("Content-Length");
    if (!cl.isEmpty()) {
      return new Framing.Length(contentLength(cl));
    }
    return new Framing.UntilClose();
  }

  private static long contentLength(List<String> values) throws Malformed {
    long length = -1;
    for (String v : values) {
      for (String part : v.split(",")) {
        String p = part.strip();
        if (p.isEmpty() || p.length() > 18 || !p.chars().allMatch(Character::isDigit)) {
          throw new Malformed(400, "Content-Length is not a number");
        }
        long n = Long.parseLong(p);
        if (length >= 0 && n != length) {
          throw new Malformed(400, "differing Content-Length values");
        }
        length = n;
      }
    }
    return length;
  }

  public static boolean isToken(String s) {
    if (s.isEmpty()) {
      return false;
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  /** {@code s} with control and non-ASCII characters replaced, short enough for a message. */
  public static String printable(String s) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < s.length() && i < 100; i++) {
      char c = s.charAt(i);
      b.append(c >= 0x20 && c < 0x7f ? c : '?');
    }
    return s.length() > 100 ? b + "..." : b.toString();
  }

  static String lower(String s) {
    return s.toLowerCase(Locale.ROOT);
  }
}
