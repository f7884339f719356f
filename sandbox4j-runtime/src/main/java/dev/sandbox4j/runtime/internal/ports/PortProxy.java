package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;

/**
 * The host's way into the ports that sandboxes listen on: a reverse proxy serving {@code
 * http://{port}-{id}.localhost:{proxyPort}/}, and raw TCP forwards from a host port to a sandbox
 * port. Runs in the home's supervisor; the backend and the proxy share only files, and the proxy
 * reaches sandboxes only through its {@link PortTargets}.
 *
 * <p><b>Files.</b> {@code $home/network/proxy-port}: the proxy's port, chosen once by the first JVM
 * that needs it ({@value PortUrls#DEFAULT_PORT} for the default home, a free port for any other)
 * and kept; edit it to move the proxy (the supervisor binds it when it starts). {@code
 * sandboxes/<id>/port-token} (0600): the sandbox's access token, if it was created with one. {@code
 * sandboxes/<id>/forwards/<port>}: a forward of sandbox port {@code port}, empty until the proxy
 * has bound a host port for it, then that port's number. Both go with the sandbox's directory on
 * destroy.
 *
 * <p><b>A request.</b> The first request head of a connection is read (at most {@value
 * ClientInput#MAX_HEAD} bytes) and checked before anything else: origin-form target, HTTP/1.0 or
 * 1.1, one {@code Host} of the form {@code {port}-{id}.localhost[:proxyPort]} (else 400), a sandbox
 * of that id here (else 404), and, if the sandbox has a token, that token in header {@value
 * PortTokens#TOKEN_HEADER} or query parameter {@value PortTokens#TOKEN_PARAM} (else 401). Only then
 * is the sandbox woken if it sleeps (through {@link PortTargets#wake}, under its lock), stamped
 * active, and a socket connected to {@code 127.0.0.1:port} inside its network namespace ({@link
 * PortTargets#connect}); none there is a 502. The head is forwarded without the token and the
 * connection becomes a byte pipe both ways: keep- alive requests, WebSocket and {@code Upgrade:
 * h2c} pass through untouched. The connection stays bound to the sandbox its first request was
 * authorized for, so bytes never reach another one; the token is stripped from that first request
 * only.
 *
 * <p><b>Activity.</b> Bytes moving either way stamp the sandbox active (at most once a second), so
 * idle timers do not suspend a sandbox that is being used through its ports.
 *
 * <p>The jobs: {@link RequestAuthorizer} checks each request, {@link HttpConnection} carries one
 * client's requests, {@link Upstreams} wakes and connects into sandboxes, {@link Pipes} and {@link
 * Activity} move the bytes and stamp the sandbox active, {@link PortForwards} binds the TCP
 * forwards; {@link PortUrls} and {@link PortTokens} are the files the backend shares with the
 * proxy.
 *
 * <p>Thread-safety: one virtual thread per connection direction; the maps of listeners and
 * connections are concurrent.
 */
public final class PortProxy implements AutoCloseable {
  private final PortTargets targets;
  private final Log log;
  private final Connections open;
  private final Upstreams upstreams;
  private final RequestAuthorizer authorizer;
  private final PortForwards forwards;
  private volatile ServerSocket server;
  private volatile int port;
  private volatile boolean closed;
  private String lastBindFailure;

  /** Where the supervisor's log lines go. */
  public interface Log {
    void say(String line);
  }

  public PortProxy(PortTargets targets, Log log) {
    this.targets = targets;
    this.log = log;
    this.open = new Connections(log);
    this.upstreams = new Upstreams(targets);
    this.authorizer = new RequestAuthorizer(targets, this::port);
    this.forwards = new PortForwards(targets, log, open, upstreams);
  }

  /**
   * Binds the proxy's port unless bound, and starts forwarding; failures are logged and retried.
   */
  public synchronized void start() {
    if (closed) {
      return;
    }
    if (server == null) {
      try {
        int wanted = PortUrls.port(targets.home(), false);
        ServerSocket s = new ServerSocket();
        s.setReuseAddress(true);
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), wanted), 128);
        server = s;
        port = wanted;
        Thread.ofVirtual().name("port-proxy").start(() -> open.acceptLoop(s, this::serveHttp));
        log.say("port proxy listens on http://127.0.0.1:" + wanted + "/");
      } catch (IOException | RuntimeException e) {
        String why = "port proxy cannot listen yet: " + e.getMessage();
        if (!why.equals(lastBindFailure)) { // retried every scan: said once
          log.say(why);
          lastBindFailure = why;
        }
      }
    }
    forwards.start();
  }

  public int port() {
    return port;
  }

  @Override
  public synchronized void close() {
    closed = true;
    Pipes.closeQuietly(server);
    forwards.close();
    open.closeAll();
  }

  /** One client connection of the HTTP proxy. */
  private void serveHttp(Socket client) {
    HttpConnection connection = new HttpConnection(client, authorizer, upstreams, open, targets);
    try {
      connection.run();
    } catch (IOException e) {
      // the client or the server went away: nothing to answer
    } catch (WorkspaceUnavailableException e) {
      // the sandbox was destroyed while the connection was open: it ends with it
    } catch (RuntimeException e) {
      log.say("port proxy: " + e);
    } finally {
      connection.closeUpstream();
    }
  }
}
