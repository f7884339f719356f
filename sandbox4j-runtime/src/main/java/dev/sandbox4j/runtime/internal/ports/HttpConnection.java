package dev.sandbox4j.runtime.internal.ports;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;

/**
 * A client connection of the HTTP proxy: reads each request head and frames each request body
 * (Content-Length or chunked), so that every request is checked and stripped of the token, while
 * responses stream back untouched on their own thread. A request for another target than the
 * connection's current upstream (a client that pools connections by address) ends that upstream and
 * opens the new one, with the full checks; an upgrade request ({@code Upgrade:} WebSocket, h2c)
 * turns the rest of the connection into a byte pipe to its target.
 */
final class HttpConnection {
  private static final long SWITCH_WAIT_MILLIS = 2_000;

  private final Socket client;
  private final RequestAuthorizer authorizer;
  private final Upstreams upstreams;
  private final Connections connections;
  private final PortTargets targets;
  private RequestAuthorizer.Target target; // the authorized target of the current upstream, or null
  private Socket upstream;
  private OutputStream upstreamOut; // buffered: a request's head and body leave in one write
  private Thread downstream;
  private Activity activity;
  private volatile boolean switching;

  HttpConnection(
      Socket client,
      RequestAuthorizer authorizer,
      Upstreams upstreams,
      Connections connections,
      PortTargets targets) {
    this.client = client;
    this.authorizer = authorizer;
    this.upstreams = upstreams;
    this.connections = connections;
    this.targets = targets;
  }

  void run() throws IOException {
    client.setTcpNoDelay(true);
    client.setSoTimeout(ClientInput.HEAD_TIMEOUT_MILLIS);
    ClientInput in = new ClientInput(client.getInputStream());
    OutputStream out = client.getOutputStream();
    while (true) {
      RequestHead head;
      RequestAuthorizer.Target next;
      try {
        head = in.readHead();
        if (head == null) {
          endUpstream(); // the client is done: let the last response finish
          return;
        }
        client.setSoTimeout(0); // idle keep-alive and upgraded connections are legitimate
        next = authorizer.authorize(head, target);
        head.checkFraming();
      } catch (BadRequest e) {
        if (endUpstream()) {
          Responses.respond(out, e.status, e.getMessage());
        }
        return;
      }
      if (!next.equals(target) || downstream == null || !downstream.isAlive()) {
        if (target != null && !endUpstream()) {
          return; // the previous response did not end: this connection cannot go on
        }
        Socket opened = upstreams.connectForClient(next.id(), next.port(), out);
        if (opened == null) {
          return;
        }
        open(next, opened);
      } else {
        activity.wake();
      }
      OutputStream up = upstreamOut;
      up.write(head.bytes());
      if (head.isUpgrade()) {
        up.flush();
        in.spliceTo(up, activity);
        upstream.shutdownOutput();
        Pipes.join(downstream, 0);
        return;
      }
      try {
        head.copyBody(in, up);
      } catch (BadRequest e) {
        return; // a malformed chunked body, half sent: only closing is left
      }
      up.flush();
    }
  }

  private void open(RequestAuthorizer.Target next, Socket opened) throws IOException {
    target = next;
    upstream = opened;
    upstreamOut = new BufferedOutputStream(opened.getOutputStream(), Pipes.BUFFER);
    connections.add(opened);
    activity = new Activity(targets, next.id());
    switching = false;
    Socket up = opened;
    Activity a = activity;
    downstream =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    Pipes.copy(up.getInputStream(), client.getOutputStream(), a::touch);
                    if (!switching) {
                      client.shutdownOutput(); // as the server closed: a close-delimited body
                    }
                  } catch (IOException e) {
                    if (!switching) {
                      Pipes.closeQuietly(client);
                    }
                  }
                });
  }

  /**
   * Ends the current upstream after its response: half-closes it and waits a little for the server
   * to finish and close; returns false if it did not (the connection must end).
   */
  private boolean endUpstream() {
    if (upstream == null) {
      return true;
    }
    switching = true;
    boolean done;
    try {
      upstream.shutdownOutput();
      done = Pipes.join(downstream, SWITCH_WAIT_MILLIS);
    } catch (IOException e) {
      done = true; // already closed
    }
    closeUpstream();
    return done;
  }

  void closeUpstream() {
    if (upstream != null) {
      connections.remove(upstream);
      Pipes.closeQuietly(upstream);
      Pipes.join(downstream, SWITCH_WAIT_MILLIS);
      upstream = null;
      downstream = null;
      target = null;
    }
  }
}
