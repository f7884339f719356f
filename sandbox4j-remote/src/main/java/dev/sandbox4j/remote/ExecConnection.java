package dev.sandbox4j.remote;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.http.WebSocket;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Lock;

/**
 * One kept-open exec WebSocket to one sandbox ({@code GET /v1/sandboxes/{id}/exec?keepOpen=true}),
 * carrying one command at a time: the {@link ExecCall} attached now gets its events, and after a
 * command's {@code exit} the connection can go back to its {@link Pool} for the next one, which
 * saves the TCP connection, the upgrade and the key check per command.
 *
 * <p>The JDK calls the listener methods one at a time, and the next frame is requested only after
 * one is handled, so a call sees its events in order. A frame that arrives with no call attached
 * (there should be none) makes the connection unusable rather than being lost silently.
 */
final class ExecConnection implements WebSocket.Listener {

  private final String sandbox;
  private final StringBuilder frame = new StringBuilder();
  private volatile WebSocket socket;
  private volatile ExecCall call;
  private volatile boolean usable = true;
  private long idleSince; // guarded by the pool
  private volatile long lastHeard = System.nanoTime();
  private volatile long pingSent; // 0: no ping outstanding

  ExecConnection(String sandbox) {
    this.sandbox = sandbox;
  }

  String sandbox() {
    return sandbox;
  }

  WebSocket socket() {
    return socket;
  }

  void attach(ExecCall next) {
    call = next;
  }

  void detach() {
    call = null;
  }

  /** Whether the socket is still open both ways and nothing unexpected came over it. */
  boolean usable() {
    WebSocket s = socket;
    return usable && s != null && !s.isInputClosed() && !s.isOutputClosed();
  }

  /** Drops the connection at once (no close handshake): for a socket in an unknown state. */
  void abort() {
    usable = false;
    WebSocket s = socket;
    if (s != null) {
      s.abort();
    }
  }

  /** Closes an idle connection politely. */
  void close() {
    usable = false;
    WebSocket s = socket;
    if (s != null && !s.isOutputClosed()) {
      s.sendClose(WebSocket.NORMAL_CLOSURE, "idle").exceptionally(e -> null);
    }
  }

  /**
   * Null while the connection is alive as far as can be told; else why it is lost (it is then
   * aborted). Sends a ping once nothing was heard for {@code pingAfterNanos}, under {@code sending}
   * (the JDK's WebSocket allows one outstanding send; if a send is under way now, the ping waits
   * for the next look). A ping that cannot be sent, or goes unanswered for {@code pongWaitNanos},
   * means the connection is lost.
   */
  IOException checkAlive(long pingAfterNanos, long pongWaitNanos, Lock sending) {
    WebSocket s = socket;
    if (s == null) {
      return null;
    }
    long now = System.nanoTime();
    long sent = pingSent;
    if (sent != 0) {
      if (now - sent > pongWaitNanos) {
        abort();
        return new IOException(
            "the server did not answer a ping for "
                + pongWaitNanos / 1_000_000_000L
                + " s: the connection is lost");
      }
      return null;
    }
    if (now - lastHeard < pingAfterNanos || !sending.tryLock()) {
      return null;
    }
    try {
      pingSent = now;
      s.sendPing(ByteBuffer.allocate(0)).get(pongWaitNanos, TimeUnit.NANOSECONDS);
      return null;
    } catch (ExecutionException | TimeoutException | IllegalStateException e) {
      abort();
      Throwable cause = e instanceof ExecutionException ee ? ee.getCause() : e;
      return new IOException("the exec connection is broken: a ping failed: " + cause, cause);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    } finally {
      sending.unlock();
    }
  }

  private void heard() {
    lastHeard = System.nanoTime();
    pingSent = 0;
  }

  @Override
  public CompletionStage<?> onPong(WebSocket webSocket, ByteBuffer message) {
    heard();
    webSocket.request(1);
    return null;
  }

  @Override
  public void onOpen(WebSocket webSocket) {
    socket = webSocket;
    webSocket.request(1);
  }

  @Override
  public CompletionStage<?> onText(WebSocket webSocket, CharSequence data, boolean last) {
    heard();
    frame.append(data);
    if (last) {
      String text = frame.toString();
      frame.setLength(0);
      ExecCall current = call;
      if (current == null) {
        usable = false; // nobody asked: this socket's state is not what the pool thinks
      } else {
        JsonNode event;
        try {
          event = ServerClient.JSON.readTree(text);
        } catch (IOException e) {
          event = null;
        }
        current.event(event, text);
      }
    }
    webSocket.request(1);
    return null;
  }

  @Override
  public CompletionStage<?> onBinary(WebSocket webSocket, ByteBuffer data, boolean last) {
    heard();
    webSocket.request(1);
    return null;
  }

  @Override
  public CompletionStage<?> onClose(WebSocket webSocket, int statusCode, String reason) {
    usable = false;
    ExecCall current = call;
    if (current != null) {
      current.closed();
    }
    return null;
  }

  @Override
  public void onError(WebSocket webSocket, Throwable error) {
    usable = false;
    ExecCall current = call;
    if (current != null) {
      current.failed(error instanceof IOException io ? io : new IOException(error));
    }
  }

  /**
   * Idle connections of one client, per sandbox, most recently used first. A connection idle for
   * longer than {@link #MAX_IDLE_NANOS} is closed instead of reused: the server closes a waiting
   * socket after a minute, and reusing one it is about to close would cost a retry.
   */
  static final class Pool {

    /** Idle connections kept per sandbox: more than a few parallel commands open new ones. */
    static final int PER_SANDBOX = 4;

    /** Idle connections kept in all: a client that touches many sandboxes holds no more. */
    static final int IN_ALL = 64;

    static final long MAX_IDLE_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final Map<String, ArrayDeque<ExecConnection>> idle = new HashMap<>(); // guarded by this
    private int kept; // guarded by this: how many connections idle holds

    /** An idle, open connection to {@code sandbox}, or null. */
    ExecConnection take(String sandbox) {
      List<ExecConnection> stale = new ArrayList<>();
      ExecConnection found = null;
      long now = System.nanoTime();
      synchronized (this) {
        ArrayDeque<ExecConnection> queue = idle.get(sandbox);
        while (queue != null && !queue.isEmpty() && found == null) {
          ExecConnection c = queue.pollFirst();
          kept--;
          if (c.usable() && now - c.idleSince < MAX_IDLE_NANOS) {
            found = c;
          } else {
            stale.add(c);
          }
        }
        if (queue != null && queue.isEmpty()) {
          idle.remove(sandbox);
        }
      }
      stale.forEach(ExecConnection::close);
      return found;
    }

    /** Keeps {@code connection}, idle now, for the next command on its sandbox. */
    void give(ExecConnection connection) {
      connection.detach();
      ExecConnection dropped = connection;
      synchronized (this) {
        if (connection.usable() && kept < IN_ALL) {
          connection.idleSince = System.nanoTime();
          ArrayDeque<ExecConnection> queue =
              idle.computeIfAbsent(connection.sandbox(), k -> new ArrayDeque<>());
          queue.addFirst(connection);
          dropped = queue.size() > PER_SANDBOX ? queue.pollLast() : null;
          kept += dropped == null ? 1 : 0;
        }
      }
      if (dropped != null) {
        dropped.close(); // closed under us, or more idle than the pool keeps
      }
    }

    /** Closes the idle connections to {@code sandbox}: it was destroyed. */
    void forget(String sandbox) {
      ArrayDeque<ExecConnection> queue;
      synchronized (this) {
        queue = idle.remove(sandbox);
        if (queue != null) {
          kept -= queue.size();
        }
      }
      if (queue != null) {
        queue.forEach(ExecConnection::close);
      }
    }
  }
}
