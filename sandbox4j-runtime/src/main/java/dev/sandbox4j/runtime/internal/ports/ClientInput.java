package dev.sandbox4j.runtime.internal.ports;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** The client's bytes, buffered: request heads are parsed, bodies copied on as framed. */
final class ClientInput {
  static final int MAX_HEAD = 32 * 1024;
  static final int HEAD_TIMEOUT_MILLIS = 30_000;
  private static final int MAX_CHUNK_LINE = 4096;

  private final InputStream in;
  private byte[] buf = new byte[16 * 1024];
  private int pos;
  private int lim;

  ClientInput(InputStream in) {
    this.in = in;
  }

  /** The next request head; null if the client closed the connection between requests. */
  RequestHead readHead() throws IOException, BadRequest {
    int scanned = 0; // bytes after pos already searched (offsets survive fill's compaction)
    while (true) {
      for (int i = pos + Math.max(0, scanned - 3); i + 3 < lim; i++) {
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
          RequestHead head =
              RequestHead.parse(new String(buf, pos, i - pos, StandardCharsets.ISO_8859_1));
          pos = i + 4;
          return head;
        }
      }
      scanned = lim - pos;
      if (scanned >= MAX_HEAD) {
        throw new BadRequest(431, "request head larger than " + MAX_HEAD + " bytes");
      }
      int n;
      try {
        n = fill();
      } catch (SocketTimeoutException e) {
        throw new BadRequest(408, "no complete request head within " + HEAD_TIMEOUT_MILLIS + " ms");
      }
      if (n < 0) {
        if (lim == pos) {
          return null;
        }
        throw new BadRequest(400, "connection closed in the request head");
      }
    }
  }

  /** Reads more bytes after {@code lim}, compacting or growing the buffer; -1 at EOF. */
  private int fill() throws IOException {
    if (lim == buf.length) {
      if (pos > 0) {
        System.arraycopy(buf, pos, buf, 0, lim - pos);
        lim -= pos;
        pos = 0;
      } else {
        buf = Arrays.copyOf(buf, buf.length * 2);
      }
    }
    int n = in.read(buf, lim, buf.length - lim);
    if (n > 0) {
      lim += n;
    }
    return n;
  }

  /** Copies exactly {@code n} bytes to {@code out}. */
  void copy(long n, OutputStream out) throws IOException {
    while (n > 0) {
      if (pos == lim) {
        pos = lim = 0;
        if (fill() < 0) {
          throw new IOException("the client closed the connection in a request body");
        }
      }
      int k = (int) Math.min(n, lim - pos);
      out.write(buf, pos, k);
      pos += k;
      n -= k;
    }
  }

  /** Reads a CRLF-terminated line (of a chunked body) and copies it on; returns it. */
  String copyLine(OutputStream out) throws IOException, BadRequest {
    int scanned = 0;
    while (true) {
      for (int i = pos + Math.max(0, scanned - 1); i + 1 < lim; i++) {
        if (buf[i] == '\r' && buf[i + 1] == '\n') {
          String line = new String(buf, pos, i - pos, StandardCharsets.ISO_8859_1);
          out.write(buf, pos, i + 2 - pos);
          pos = i + 2;
          return line;
        }
      }
      scanned = lim - pos;
      if (scanned > MAX_CHUNK_LINE) {
        throw new BadRequest(400, "chunk line longer than " + MAX_CHUNK_LINE + " bytes");
      }
      if (fill() < 0) {
        throw new IOException("the client closed the connection in a chunked body");
      }
    }
  }

  /** Copies what is buffered, then everything the client sends, until it closes. */
  void spliceTo(OutputStream out, Activity activity) throws IOException {
    if (lim > pos) {
      out.write(buf, pos, lim - pos);
      out.flush();
      pos = lim;
    }
    Pipes.copy(in, out, activity::wake);
  }
}
