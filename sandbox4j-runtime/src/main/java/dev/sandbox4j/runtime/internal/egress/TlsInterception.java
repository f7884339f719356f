package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.http.HttpWire;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.GeneralSecurityException;
import java.util.logging.Level;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * TLS terminated for a policy that intercepts it: the client gets a leaf certificate for the
 * tunnel's host from the home's {@link ProxyCa}, and each request inside is checked against the
 * policy again and sent to the real server over verified TLS with the policy's header rules.
 */
final class TlsInterception {
  private final ConnectionContext context;
  private final Socket client;
  private final InetAddress source;
  private final HttpExchange exchange;

  TlsInterception(
      ConnectionContext context, Socket client, InetAddress source, HttpExchange exchange) {
    this.context = context;
    this.client = client;
    this.source = source;
    this.exchange = exchange;
  }

  void intercept(PolicyCheck.Target target, EgressPolicy firstPolicy, byte[] early)
      throws IOException {
    SSLSocket tls;
    try {
      SSLContext serverContext = context.ca().get().serverContext(target.host());
      tls =
          (SSLSocket)
              serverContext
                  .getSocketFactory()
                  .createSocket(client, new ByteArrayInputStream(early), true);
      tls.setUseClientMode(false);
      SSLParameters params = tls.getSSLParameters();
      params.setApplicationProtocols(new String[] {"http/1.1"});
      tls.setSSLParameters(params);
      client.setSoTimeout((int) Math.max(1, context.headTimeoutNanos() / 1_000_000));
      tls.startHandshake();
    } catch (GeneralSecurityException | SSLException e) {
      EgressProxy.LOG.log(Level.FINE, "TLS interception handshake with " + source + " failed", e);
      return;
    }
    context.sockets().add(tls);
    try {
      HttpWire in = new HttpWire(tls, context.idleTimeout());
      OutputStream out =
          new BufferedOutputStream(tls.getOutputStream(), ClientConnection.HEAD_BUFFER);
      EgressPolicy policy = firstPolicy;
      while (!context.sockets().isClosed()) {
        try {
          HttpWire.Head head = in.readHead(System.nanoTime() + context.headTimeoutNanos());
          if (head == null) {
            return;
          }
          String[] parts = RequestTargets.requestLine(head);
          if (parts[0].equals("CONNECT") || !parts[1].startsWith("/")) {
            throw new HttpWire.Malformed(
                400, "inside an intercepted tunnel, send origin-form requests (GET /path)");
          }
          String host = head.get("Host");
          if (host != null && !RequestTargets.sameHost(host, target.host())) {
            throw new Refusal(
                421,
                "sandbox4j egress proxy: this tunnel goes to "
                    + target.host()
                    + ", not "
                    + HttpWire.printable(host));
          }
          policy = context.policies().policyOf(source);
          PolicyCheck.Target now = context.policies().decide(policy, target.host(), target.port());
          if (!exchange.exchange(parts, head, policy, now, true, in, out)) {
            return;
          }
        } catch (HttpWire.Malformed e) {
          Replies.respond(out, e.status, "sandbox4j egress proxy: bad request: " + e.getMessage());
          return;
        } catch (Refusal e) {
          Replies.respond(out, e.status, e.getMessage());
          return;
        } catch (SocketTimeoutException e) {
          return;
        }
      }
    } finally {
      context.sockets().remove(tls);
    }
  }
}
