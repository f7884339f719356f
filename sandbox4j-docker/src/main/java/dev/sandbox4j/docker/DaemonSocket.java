package dev.sandbox4j.docker;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * One HTTP/1.1 connection to the daemon for the calls docker-java cannot make as we need them: an
 * exec's attach, whose stdin must be half-closed at its end (docker-java's transport never shuts
 * its output down, so the command would never see EOF), an image import with {@code changes}, and
 * the few plain calls of the supervisor, which runs without docker-java ({@link #call}). A unix
 * socket ({@code unix://}) or plain TCP ({@code tcp://}); the JDK's own channels, so no native
 * code. Not thread-safe, except that one thread may read while another writes.
 */
final class DaemonSocket implements AutoCloseable {
  /** The most a status line or header block may take: the daemon's are a few hundred bytes. */
  private static final int MAX_HEAD = 64 * 1024;

  private final SocketChannel channel;
  private final InputStream in;
  private final OutputStream out;

  private DaemonSocket(SocketChannel channel) {
    this.channel = channel;
    this.in = new ChannelIn(channel);
    this.out = new ChannelOut(channel);
  }

  /** Connects to the daemon at {@code host} ({@code unix:///path} or {@code tcp://host:port}). */
  static DaemonSocket connect(URI host) throws IOException {
    switch (host.getScheme()) {
      case "unix" -> {
        SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
          ch.connect(UnixDomainSocketAddress.of(Path.of(host.getPath())));
        } catch (IOException e) {
          ch.close();
          throw e;
        }
        return new DaemonSocket(ch);
      }
      case "tcp", "http" -> {
        int port = host.getPort() > 0 ? host.getPort() : 2375;
        return new DaemonSocket(SocketChannel.open(new InetSocketAddress(host.getHost(), port)));
      }
      default ->
          throw new IOException(
              "cannot reach the Docker daemon at "
                  + host
                  + ": only unix:// and plain tcp:// are supported (no TLS yet)");
    }
  }

  /** A response's status and headers (names lower case); its body is {@link #body()}. */
  record Head(int status, String reason, Map<String, String> headers) {}

  /**
   * Sends a request. {@code body} is sent with its length, or chunked if {@code streamed} is not
   * null (then {@code body} must be null); extra headers are added as given.
   */
  void send(
      String method, String path, Map<String, String> headers, byte[] body, InputStream streamed)
      throws IOException {
    StringBuilder head = new StringBuilder();
    head.append(method).append(' ').append(path).append(" HTTP/1.1\r\nHost: docker\r\n");
    for (Map.Entry<String, String> h : headers.entrySet()) {
      head.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n");
    }
    if (streamed != null) {
      head.append("Transfer-Encoding: chunked\r\n\r\n");
      out.write(head.toString().getBytes(StandardCharsets.US_ASCII));
      byte[] buffer = new byte[256 * 1024];
      int n;
      while ((n = streamed.read(buffer)) > 0) {
        out.write((Integer.toHexString(n) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(buffer, 0, n);
        out.write(CRLF);
      }
      out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
    } else {
      byte[] b = body == null ? new byte[0] : body;
      head.append("Content-Length: ").append(b.length).append("\r\n\r\n");
      out.write(head.toString().getBytes(StandardCharsets.US_ASCII));
      out.write(b);
    }
  }

  private static final byte[] CRLF = {'\r', '\n'};

  /** Reads the status line and headers of the response. */
  Head readHead() throws IOException {
    String status = line();
    String[] parts = status.split(" ", 3);
    if (parts.length < 2 || !parts[0].startsWith("HTTP/1.")) {
      throw new IOException("the Docker daemon answered with no HTTP status line: " + status);
    }
    int code;
    try {
      code = Integer.parseInt(parts[1]);
    } catch (NumberFormatException e) {
      throw new IOException("the Docker daemon answered with a bad status line: " + status, e);
    }
    Map<String, String> headers = new LinkedHashMap<>();
    int total = status.length();
    for (String h = line(); !h.isEmpty(); h = line()) {
      total += h.length();
      if (total > MAX_HEAD) {
        throw new IOException("the Docker daemon's response headers exceed " + MAX_HEAD + " bytes");
      }
      int colon = h.indexOf(':');
      if (colon > 0) {
        headers.put(
            h.substring(0, colon).strip().toLowerCase(Locale.ROOT), h.substring(colon + 1).strip());
      }
    }
    return new Head(code, parts.length > 2 ? parts[2] : "", headers);
  }

  /**
   * The body of a response whose head was read: the raw stream after an upgrade, else de-chunked or
   * bounded by its length.
   */
  InputStream body(Head head) {
    if (head.status() == 101) {
      return in;
    }
    if ("chunked".equalsIgnoreCase(head.headers().getOrDefault("transfer-encoding", ""))) {
      return new Chunked(in);
    }
    String length = head.headers().get("content-length");
    if (length != null) {
      return new Bounded(in, Long.parseLong(length));
    }
    return in; // to the end of the connection
  }

  /** The whole body as text (for error messages and small JSON), at most {@code max} bytes. */
  static String text(InputStream body, int max) throws IOException {
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    byte[] buffer = new byte[8192];
    int n;
    while ((n = body.read(buffer)) > 0 && all.size() < max) {
      all.write(buffer, 0, Math.min(n, max - all.size()));
    }
    return all.toString(StandardCharsets.UTF_8);
  }

  /** A plain call's status and body (at most 1 MiB of it). */
  record Reply(int status, String body) {}

  /**
   * One request without a body on a connection of its own, for a process that has no docker-java
   * (the {@link DockerSupervisor}): {@code GET /containers/NAME/json}, {@code POST .../start}.
   */
  static Reply call(URI host, String method, String path) throws IOException {
    try (DaemonSocket socket = connect(host)) {
      socket.send(method, path, Map.of("Connection", "close"), null, null);
      Head head = socket.readHead();
      return new Reply(head.status(), text(socket.body(head), 1 << 20));
    }
  }

  /** The raw output, for a hijacked stream's stdin. */
  OutputStream output() {
    return out;
  }

  /** Ends what this side sends (the exec's stdin sees EOF); reading goes on. */
  void shutdownOutput() throws IOException {
    channel.shutdownOutput();
  }

  @Override
  public void close() {
    try {
      channel.close();
    } catch (IOException e) {
      // closed already
    }
  }

  private String line() throws IOException {
    StringBuilder line = new StringBuilder();
    while (true) {
      int c = in.read();
      if (c < 0) {
        throw new EOFException("the Docker daemon closed the connection mid-response");
      }
      if (c == '\n') {
        int end = line.length();
        if (end > 0 && line.charAt(end - 1) == '\r') {
          line.setLength(end - 1);
        }
        return line.toString();
      }
      if (line.length() >= MAX_HEAD) {
        throw new IOException("the Docker daemon sent a header line over " + MAX_HEAD + " bytes");
      }
      line.append((char) c);
    }
  }

  /** Reads a channel directly: one reader may block while another thread writes. */
  private static final class ChannelIn extends InputStream {
    private final SocketChannel channel;
    private final ByteBuffer buffer = ByteBuffer.allocate(64 * 1024).flip();

    ChannelIn(SocketChannel channel) {
      this.channel = channel;
    }

    private boolean fill() throws IOException {
      if (buffer.hasRemaining()) {
        return true;
      }
      buffer.clear();
      int n = channel.read(buffer);
      buffer.flip();
      return n > 0;
    }

    @Override
    public int read() throws IOException {
      return fill() ? buffer.get() & 0xff : -1;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      if (!fill()) {
        return -1;
      }
      int n = Math.min(len, buffer.remaining());
      buffer.get(b, off, n);
      return n;
    }

    @Override
    public void close() throws IOException {
      channel.close();
    }
  }

  private static final class ChannelOut extends OutputStream {
    private final SocketChannel channel;

    ChannelOut(SocketChannel channel) {
      this.channel = channel;
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      ByteBuffer buf = ByteBuffer.wrap(b, off, len);
      while (buf.hasRemaining()) {
        channel.write(buf);
      }
    }
  }

  /** A body of known length. */
  private static final class Bounded extends InputStream {
    private final InputStream in;
    private long left;

    Bounded(InputStream in, long length) {
      this.in = in;
      this.left = length;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (left <= 0) {
        return -1;
      }
      int n = in.read(b, off, (int) Math.min(len, left));
      if (n > 0) {
        left -= n;
      }
      return n;
    }
  }

  /** A chunked body, de-chunked. */
  private final class Chunked extends InputStream {
    private final InputStream in;
    private long left;
    private boolean done;

    Chunked(InputStream in) {
      this.in = in;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (done) {
        return -1;
      }
      if (left == 0) {
        String size = line();
        int semi = size.indexOf(';');
        try {
          left = Long.parseLong((semi < 0 ? size : size.substring(0, semi)).strip(), 16);
        } catch (NumberFormatException e) {
          throw new IOException("the Docker daemon sent a bad chunk size: " + size, e);
        }
        if (left == 0) {
          while (!line().isEmpty()) {
            // trailers
          }
          done = true;
          return -1;
        }
      }
      int n = in.read(b, off, (int) Math.min(len, left));
      if (n < 0) {
        throw new EOFException("the Docker daemon closed the connection mid-chunk");
      }
      left -= n;
      if (left == 0) {
        line(); // the CRLF after the chunk
      }
      return n;
    }
  }
}
