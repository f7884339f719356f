package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * One request forwarded upstream and its response back: the request head rebuilt without hop-by-hop
 * fields and with the policy's header rules for the host, both bodies streamed as framed, {@code
 * Connection: close} upstream (no upstream connection is reused).
 */
final class HttpExchange {
  /** Hop-by-hop fields (RFC 9110 7.6.1) and what the proxy itself sets: never forwarded. */
  private static final Set<String> HOP_BY_HOP =
      Set.of(
          "connection",
          "keep-alive",
          "proxy-connection",
          "proxy-authorization",
          "proxy-authenticate",
          "te",
          "upgrade",
          "transfer-encoding",
          "content-length",
          "host",
          "expect");

  private final ConnectionContext context;
  private final byte[] scratch;

  HttpExchange(ConnectionContext context, byte[] scratch) {
    this.context = context;
    this.scratch = scratch;
  }

  /**
   * Sends one request to {@code target} (over TLS if {@code tls}) and its response back.
   *
   * @return whether the client connection may carry another request
   */
  boolean exchange(
      String[] parts,
      HttpWire.Head head,
      EgressPolicy policy,
      PolicyCheck.Target target,
      boolean tls,
      HttpWire in,
      OutputStream out)
      throws IOException, HttpWire.Malformed, Refusal {
    String method = parts[0];
    HttpWire.Framing body = HttpWire.requestFraming(head);
    if (parts[2].equals("HTTP/1.0") && body instanceof HttpWire.Framing.Chunked) {
      throw new HttpWire.Malformed(400, "HTTP/1.0 has no chunked encoding");
    }
    boolean clientKeepAlive =
        parts[2].equals("HTTP/1.1")
            ? !head.hasToken("Connection", "close")
            : head.hasToken("Connection", "keep-alive");
    Socket upstream = tls ? context.upstreams().openTls(target) : context.upstreams().open(target);
    context.sockets().add(upstream);
    try {
      upstream.setSoTimeout(context.idleTimeout());
      OutputStream up =
          new BufferedOutputStream(upstream.getOutputStream(), ClientConnection.HEAD_BUFFER);
      writeRequestHead(up, parts, head, policy, target, body, tls);
      if (head.hasToken("Expect", "100-continue")) {
        // The proxy asks upstream nothing about it: it says go on itself, then streams.
        Replies.writeAscii(out, "HTTP/1.1 100 Continue\r\n\r\n");
        out.flush();
      }
      boolean bodySent = true;
      try {
        in.copyBody(body, up, scratch);
        up.flush();
      } catch (SocketException e) {
        bodySent = false; // upstream answered early and closed; its answer may still be there
      }
      HttpWire upIn = new HttpWire(upstream, context.idleTimeout());
      HttpWire.Head response;
      int status;
      while (true) {
        try {
          response = upIn.readHead(System.nanoTime() + (long) context.idleTimeout() * 1_000_000);
          status = response == null ? 0 : statusOf(response);
        } catch (HttpWire.Malformed e) {
          throw new Refusal(
              502,
              "sandbox4j egress proxy: "
                  + target.host()
                  + " sent a bad response: "
                  + e.getMessage());
        } catch (SocketTimeoutException e) {
          throw new Refusal(
              504, "sandbox4j egress proxy: " + target.host() + " did not answer in time");
        }
        if (response == null) {
          throw new Refusal(
              502,
              "sandbox4j egress proxy: "
                  + target.host()
                  + " closed the connection without a response");
        }
        if (status == 100 || status == 102 || status == 103) {
          if (status != 100) {
            writeResponseHead(out, response, false);
            out.flush();
          }
          continue;
        }
        if (status == 101) {
          throw new Refusal(
              502, "sandbox4j egress proxy: protocol upgrades pass only through CONNECT");
        }
        break;
      }
      HttpWire.Framing responseBody;
      try {
        responseBody = HttpWire.responseFraming(method, status, response);
      } catch (HttpWire.Malformed e) {
        throw new Refusal(
            502,
            "sandbox4j egress proxy: " + target.host() + " sent a bad response: " + e.getMessage());
      }
      boolean keep =
          clientKeepAlive && bodySent && !(responseBody instanceof HttpWire.Framing.UntilClose);
      writeResponseHead(out, response, !keep);
      try {
        upIn.copyBody(responseBody, out, scratch);
      } catch (HttpWire.Malformed e) {
        return false; // the head is out: all that can be said is to close
      }
      out.flush();
      return keep;
    } finally {
      context.sockets().remove(upstream);
      OpenSockets.closeQuietly(upstream);
    }
  }

  private void writeRequestHead(
      OutputStream up,
      String[] parts,
      HttpWire.Head head,
      EgressPolicy policy,
      PolicyCheck.Target target,
      HttpWire.Framing body,
      boolean tls)
      throws IOException {
    Map<String, String> inject = policy.headersFor(target.host(), target.port(), tls);
    Set<String> drop = new HashSet<>(HOP_BY_HOP);
    for (String v : head.all("Connection")) {
      for (String t : v.split(",")) {
        drop.add(t.strip().toLowerCase(Locale.ROOT));
      }
    }
    inject.keySet().forEach(k -> drop.add(k.toLowerCase(Locale.ROOT)));
    StringBuilder b = new StringBuilder(512);
    // An HTTP/1.0 client's request goes up as 1.0, so no chunked answer comes back to it.
    b.append(parts[0]).append(' ').append(parts[1]).append(' ').append(parts[2]).append("\r\n");
    String hostHeader = target.host().contains(":") ? "[" + target.host() + "]" : target.host();
    b.append("Host: ").append(hostHeader);
    if (target.port() != (tls ? 443 : 80)) {
      b.append(':').append(target.port());
    }
    b.append("\r\n");
    for (String[] f : head.fields()) {
      if (!drop.contains(f[0].toLowerCase(Locale.ROOT))) {
        b.append(f[0]).append(": ").append(f[1]).append("\r\n");
      }
    }
    inject.forEach((k, v) -> b.append(k).append(": ").append(v).append("\r\n"));
    switch (body) {
      case HttpWire.Framing.Chunked c -> b.append("Transfer-Encoding: chunked\r\n");
      case HttpWire.Framing.Length l ->
          b.append("Content-Length: ").append(l.bytes()).append("\r\n");
      default -> {}
    }
    b.append("Connection: close\r\n\r\n");
    up.write(b.toString().getBytes(StandardCharsets.ISO_8859_1));
  }

  private static int statusOf(HttpWire.Head response) throws HttpWire.Malformed {
    String line = response.startLine();
    if (line.length() < 12
        || !line.startsWith("HTTP/1.")
        || line.charAt(8) != ' '
        || !Character.isDigit(line.charAt(9))
        || !Character.isDigit(line.charAt(10))
        || !Character.isDigit(line.charAt(11))) {
      throw new HttpWire.Malformed(502, "bad status line");
    }
    return Integer.parseInt(line.substring(9, 12));
  }

  private static void writeResponseHead(OutputStream out, HttpWire.Head response, boolean close)
      throws IOException {
    Set<String> drop = new HashSet<>(Set.of("connection", "keep-alive", "proxy-connection"));
    for (String v : response.all("Connection")) {
      for (String t : v.split(",")) {
        String name = t.strip().toLowerCase(Locale.ROOT);
        if (!name.equals("content-length") && !name.equals("transfer-encoding")) {
          drop.add(name);
        }
      }
    }
    StringBuilder b = new StringBuilder(512);
    b.append(response.startLine()).append("\r\n");
    for (String[] f : response.fields()) {
      if (!drop.contains(f[0].toLowerCase(Locale.ROOT))) {
        b.append(f[0]).append(": ").append(f[1]).append("\r\n");
      }
    }
    if (close) {
      b.append("Connection: close\r\n");
    }
    b.append("\r\n");
    out.write(b.toString().getBytes(StandardCharsets.ISO_8859_1));
  }
}
