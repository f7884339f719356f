package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;

/**
 * One client connection: reads each request head, asks the policy, and serves it as plain HTTP
 * ({@link HttpExchange}) or as a {@code CONNECT} ({@link ConnectTunnel}), answering refusals and
 * bad requests itself.
 */
final class ClientConnection {
  static final int BUFFER = 64 * 1024;

  /**
   * Output buffers gather heads; bodies pass them by (a write larger than the buffer goes through).
   */
  static final int HEAD_BUFFER = 16 * 1024;

  private final ConnectionContext context;
  private final Socket client;
  private final InetAddress source;
  private final byte[] scratch = new byte[BUFFER];

  private final HttpExchange exchange;

  ClientConnection(ConnectionContext context, Socket client, InetAddress source) {
    this.context = context;
    this.client = client;
    this.source = source;
    this.exchange = new HttpExchange(context, scratch);
  }

  void run() throws IOException {
    HttpWire in = new HttpWire(client, context.idleTimeout());
    OutputStream out = new BufferedOutputStream(client.getOutputStream(), HEAD_BUFFER);
    while (!context.sockets().isClosed()) {
      HttpWire.Head head;
      String method;
      try {
        head = in.readHead(System.nanoTime() + context.headTimeoutNanos());
        if (head == null) {
          return;
        }
        String[] parts = RequestTargets.requestLine(head);
        method = parts[0];
        EgressPolicy policy = context.policies().policyOf(source);
        if (method.equals("CONNECT")) {
          new ConnectTunnel(context, client, source, scratch, exchange)
              .connect(parts[1], policy, in, out);
          return;
        }
        if (!forward(parts, head, policy, in, out)) {
          return;
        }
      } catch (HttpWire.Malformed e) {
        Replies.respond(out, e.status, "sandbox4j egress proxy: bad request: " + e.getMessage());
        return;
      } catch (Refusal e) {
        Replies.respond(out, e.status, e.getMessage());
        return;
      } catch (SocketTimeoutException e) {
        return; // a slow or idle client: drop it without a word
      }
    }
  }

  /** Forwards one absolute-form request; whether the client connection may carry another. */
  private boolean forward(
      String[] parts, HttpWire.Head head, EgressPolicy policy, HttpWire in, OutputStream out)
      throws IOException, HttpWire.Malformed, Refusal {
    String uri = parts[1];
    if (!uri.regionMatches(true, 0, "http://", 0, 7)) {
      if (uri.regionMatches(true, 0, "https://", 0, 8)) {
        throw new HttpWire.Malformed(400, "send https:// requests through CONNECT");
      }
      throw new HttpWire.Malformed(
          400, "this is an egress proxy: send absolute-form requests (GET http://host/path)");
    }
    int pathStart = uri.length();
    for (int i = 7; i < uri.length(); i++) {
      char c = uri.charAt(i);
      if (c == '/' || c == '?' || c == '#') {
        pathStart = i;
        break;
      }
    }
    String authority = uri.substring(7, pathStart);
    String path = pathStart == uri.length() ? "/" : uri.substring(pathStart);
    if (path.startsWith("?")) {
      path = "/" + path;
    }
    int hash = path.indexOf('#');
    if (hash >= 0) {
      path = path.substring(0, hash);
    }
    String[] hp = RequestTargets.splitAuthority(authority, 80);
    PolicyCheck.Target target = context.policies().decide(policy, hp[0], Integer.parseInt(hp[1]));
    return exchange.exchange(
        new String[] {parts[0], path, parts[2]}, head, policy, target, false, in, out);
  }
}
