package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.util.Base64;
import java.util.concurrent.CancellationException;

/**
 * One command run for a client, its events sent to a {@link Sink} as they happen: output, then
 * {@code exit} or {@code error} last. Cancelling (the client went away, sent {@code cancel}, or the
 * server stops) kills the command's tree and sends no last event: a stream that ends without one
 * tells the client the command's fate is unknown.
 *
 * <p>State: NEW → RUNNING (on the thread that called {@link #run}) → DONE; {@link #cancel} from any
 * thread interrupts the runner only while RUNNING, under this object's lock, so a late cancel never
 * hits the thread once it serves something else.
 */
final class ExecRun {

  /** Where events go; called from several threads (stdout and stderr), one call at a time. */
  interface Sink {
    void send(ObjectNode event) throws IOException;
  }

  private final Workspace workspace;
  private final Command command;
  private final RunOptions.Builder options;
  private final Sink sink;
  private final Metrics metrics;
  private Thread runner; // guarded by this
  private boolean done; // guarded by this
  private boolean cancelled; // guarded by this
  private final Object sendLock = new Object();
  private boolean finished; // guarded by sendLock: the last event went out, nothing may follow
  private int lastStatus; // guarded by sendLock: what the last event means, as an HTTP status

  /** The request log's status for a command that ended without a last event (nginx's). */
  static final int CANCELLED = 499;

  ExecRun(Workspace workspace, Command command, RunOptions.Builder options, Sink sink, Metrics m) {
    this.workspace = workspace;
    this.command = command;
    this.options = options;
    this.sink = sink;
    this.metrics = m;
  }

  /**
   * Runs the command on this thread until it ends or is cancelled, and returns how it ended as an
   * HTTP status for the request log: 200 for an exit, the error code's status, or 499 (the client
   * went away, or cancelled) when no last event went out.
   */
  int run() {
    synchronized (this) {
      if (cancelled) {
        return CANCELLED;
      }
      runner = Thread.currentThread();
    }
    long start = System.nanoTime();
    try {
      CommandResult result =
          workspace.run(
              command,
              options
                  .onStdout(bytes -> output("stdout", bytes))
                  .onStderr(bytes -> output("stderr", bytes))
                  .build());
      sendLast(Json.object().put("type", "exit").put("exitCode", result.exitCode()), 200);
    } catch (CancellationException e) {
      // the client or the server ended it: no last event
    } catch (WorkspaceTimeoutException e) {
      ObjectNode error = error(ErrorCode.TIMEOUT, e);
      error.put("timeoutMs", e.timeout().toMillis());
      lastError(ErrorCode.TIMEOUT, error);
    } catch (WorkspaceOutputLimitException e) {
      ObjectNode error = error(ErrorCode.OUTPUT_LIMIT, e);
      error.put("limitBytes", e.limit());
      lastError(ErrorCode.OUTPUT_LIMIT, error);
    } catch (WorkspaceUnavailableException e) {
      lastError(ErrorCode.UNAVAILABLE, error(ErrorCode.UNAVAILABLE, e));
    } catch (WorkspaceException e) {
      lastError(ErrorCode.INTERNAL, error(ErrorCode.INTERNAL, e));
    } finally {
      synchronized (this) {
        done = true;
      }
      Thread.interrupted(); // a cancel that raced with the end must not leak to the next task
      metrics.exec(System.nanoTime() - start);
    }
    synchronized (sendLock) {
      return finished ? lastStatus : CANCELLED;
    }
  }

  /**
   * Whether the last event ({@code exit} or {@code error}) is out, or going out: the client has, or
   * is about to have, the outcome, and nothing of this command follows it.
   */
  boolean reported() {
    synchronized (sendLock) {
      return finished;
    }
  }

  /** Kills the command (if running) and suppresses its last event. Idempotent. */
  synchronized void cancel() {
    cancelled = true;
    if (runner != null && !done) {
      runner.interrupt();
    }
  }

  private synchronized boolean isCancelled() {
    return cancelled;
  }

  private void output(String type, byte[] bytes) {
    if (bytes.length == 0) {
      return;
    }
    send(Json.object().put("type", type).put("data", Base64.getEncoder().encodeToString(bytes)));
  }

  private static ObjectNode error(ErrorCode code, Exception e) {
    ObjectNode error = Json.object();
    error.put("code", code.spelling());
    error.put("message", e.getMessage());
    return error;
  }

  private void lastError(ErrorCode code, ObjectNode error) {
    metrics.error(code);
    ObjectNode event = Json.object().put("type", "error");
    event.set("error", error);
    sendLast(event, code.status());
  }

  /**
   * Sends {@code {"type": "keepalive"}} unless the last event went out: over a stream that would
   * otherwise stay silent, a failed write is how the server learns that the client went away.
   */
  void keepAlive() {
    send(Json.object().put("type", "keepalive"), 0);
  }

  private void sendLast(ObjectNode event, int status) {
    send(event, status);
  }

  private void send(ObjectNode event) {
    send(event, 0);
  }

  /** Sends {@code event}; a {@code lastStatus} other than 0 makes it the last one. */
  private void send(ObjectNode event, int lastStatus) {
    if (isCancelled()) {
      return;
    }
    synchronized (sendLock) {
      if (finished) {
        return;
      }
      if (lastStatus != 0) {
        // before the bytes go: a client that has the last event may send its next request on a
        // kept-open socket at once, and that request must find this command reported
        finished = true;
        this.lastStatus = lastStatus;
      }
      try {
        sink.send(event);
      } catch (IOException | RuntimeException e) {
        if (lastStatus != 0) {
          this.lastStatus = CANCELLED; // the client never had it
        }
        cancel(); // the client is gone: nobody reads the output, so the command must not run on
      }
    }
  }
}
