package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@code CONNECT host:port}: the target is checked and connected before the client hears {@code
 * 200}; then an opaque tunnel both ways, or, when the policy intercepts TLS and the client starts
 * TLS, {@link TlsInterception}.
 */
final class ConnectTunnel {
  private static final byte TLS_HANDSHAKE = 0x16;

  private final ConnectionContext context;
  private final Socket client;
  private final InetAddress source;
  private final byte[] scratch;
  private final HttpExchange exchange;

  ConnectTunnel(
      ConnectionContext context,
      Socket client,
      InetAddress source,
      byte[] scratch,
      HttpExchange exchange) {
    this.context = context;
    this.client = client;
    this.source = source;
    this.scratch = scratch;
    this.exchange = exchange;
  }

  void connect(String authority, EgressPolicy policy, HttpWire in, OutputStream out)
      throws IOException, Refusal, HttpWire.Malformed {
    String[] hp = RequestTargets.splitAuthority(authority, -1);
    PolicyCheck.Target target = context.policies().decide(policy, hp[0], Integer.parseInt(hp[1]));
    // Connect before answering, so an unreachable target is a 502 the client sees.
    try (Socket upstream = context.upstreams().open(target)) {
      Replies.writeAscii(out, "HTTP/1.1 200 Connection established\r\n\r\n");
      out.flush();
      byte[] early = in.buffered();
      if (policy.interceptTls()) {
        if (early.length == 0) {
          // What the client sends first decides: TLS is intercepted, anything else tunnelled.
          client.setSoTimeout(context.tlsSniffMillis());
          int first;
          try {
            first = client.getInputStream().read();
          } catch (SocketTimeoutException e) {
            first = -2; // the server speaks first (ssh, smtp): a plain tunnel
          }
          if (first == -1) {
            return;
          }
          early = first == -2 ? new byte[0] : new byte[] {(byte) first};
        }
        if (early.length > 0 && early[0] == TLS_HANDSHAKE) {
          OpenSockets.closeQuietly(
              upstream); // each intercepted request opens its own TLS connection
          new TlsInterception(context, client, source, exchange).intercept(target, policy, early);
          return;
        }
      }
      tunnel(upstream, early);
    }
  }

  /** Copies bytes both ways until both sides have finished or the tunnel idles out. */
  private void tunnel(Socket upstream, byte[] early) throws IOException {
    context.sockets().add(upstream);
    try {
      AtomicLong last = new AtomicLong(System.nanoTime());
      OutputStream up = upstream.getOutputStream();
      if (early.length > 0) {
        up.write(early);
      }
      Thread back =
          Thread.ofVirtual()
              .name("egress-proxy-tunnel")
              .start(() -> pump(upstream, client, last, new byte[ClientConnection.BUFFER]));
      pump(client, upstream, last, scratch);
      try {
        back.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    } finally {
      context.sockets().remove(upstream);
    }
  }

  /** Copies {@code from} to {@code to} until EOF, then half-closes; stops when both idle out. */
  private void pump(Socket from, Socket to, AtomicLong last, byte[] buf) {
    try {
      InputStream in = from.getInputStream();
      OutputStream out = to.getOutputStream();
      int tick = Math.max(1_000, context.idleTimeout() / 4);
      from.setSoTimeout(Math.min(tick, context.idleTimeout()));
      long idleNanos = context.idleTimeout() * 1_000_000L;
      while (true) {
        int r;
        try {
          r = in.read(buf);
        } catch (SocketTimeoutException e) {
          if (System.nanoTime() - last.get() > idleNanos) {
            OpenSockets.closeQuietly(from);
            OpenSockets.closeQuietly(to);
            return;
          }
          continue;
        }
        if (r < 0) {
          try {
            to.shutdownOutput();
          } catch (IOException e) {
            // already closed: nothing left to tell
          }
          return;
        }
        out.write(buf, 0, r);
        last.setOpaque(System.nanoTime());
      }
    } catch (IOException e) {
      OpenSockets.closeQuietly(from);
      OpenSockets.closeQuietly(to);
    }
  }
}
