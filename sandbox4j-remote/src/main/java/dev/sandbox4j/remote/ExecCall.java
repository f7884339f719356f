package dev.sandbox4j.remote;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.http.WebSocketHandshakeException;
import java.time.Duration;
import java.util.Base64;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * One command run over an exec WebSocket: sends the request and stdin, hands output to the
 * callbacks as it arrives, and turns the last event into a result or an exception.
 *
 * <p>The socket is an {@link ExecConnection}: an idle one from the client's pool when there is one,
 * else a new one. A command that exits leaves its connection in the pool for the next. A pooled
 * socket can turn out closed (the server closed it while idle): if it ends before the server's
 * {@code started} event, the server ran nothing, and the command goes over a new socket. Commands
 * with stdin always take a new socket, because their stdin cannot be read twice.
 *
 * <p>Events arrive on the HTTP client's threads, one at a time, so each stream's chunks reach its
 * callback in order. Sends are serialized by {@link #sending}: the JDK's WebSocket allows one
 * outstanding send. The outcome completes once: with the {@code exit} or {@code error} event, or
 * with {@link Ended#CLOSED_EARLY} when the stream ends without either.
 */
final class ExecCall {

  /** Raw stdin per frame: its base64 stays well under a server's 64 KiB text-frame limit. */
  private static final int STDIN_CHUNK = 16 * 1024;

  /** How long a cancelled command may take to be reported killed before the socket is dropped. */
  private static final Duration KILL_WAIT = Duration.ofSeconds(20);

  /**
   * Beyond the command's own timeout, how long to wait for the server to report it: the server
   * enforces the deadline, this only keeps a dead connection from hanging the caller forever.
   */
  private static final Duration SERVER_GRACE = Duration.ofSeconds(60);

  /** How the stream ended when it brought no exit or error event. */
  enum Ended {
    CLOSED_EARLY
  }

  private final RemoteBackend backend;
  private final RunOptions options;
  private final Consumer<byte[]> onStdout;
  private final Consumer<byte[]> onStderr;
  private final ByteArrayOutputStream stdout = new ByteArrayOutputStream();
  private final ByteArrayOutputStream stderr = new ByteArrayOutputStream();
  private final ReentrantLock sending = new ReentrantLock();
  private volatile CompletableFuture<Object> outcome = new CompletableFuture<>();
  private volatile boolean started; // the server said it runs the command
  private volatile boolean cancelSent;
  private volatile WorkspaceException callbackFailure;
  private ExecConnection connection;

  ExecCall(RemoteBackend backend, RunOptions options) {
    this.backend = backend;
    this.options = options;
    this.onStdout = options.onStdout();
    this.onStderr = options.onStderr();
  }

  CommandResult run(String sandbox, Command command) {
    ServerClient server = backend.server();
    InputStream stdin = options.stdin().orElse(null);
    ObjectNode request = ServerClient.JSON.createObjectNode();
    switch (command) {
      case Command.Argv argv -> argv.args().forEach(request.putArray("argv")::add);
      case Command.Shell shell -> request.put("shell", shell.script());
    }
    if (!options.env().isEmpty()) {
      ObjectNode env = request.putObject("env");
      options.env().forEach(env::put);
    }
    options.timeout().ifPresent(t -> request.put("timeoutMs", Math.max(1, t.toMillis())));
    request.put("outputLimitBytes", options.outputLimit());
    if (stdin == null) {
      request.put("stdin", false);
    }
    // the trace context in the request itself: a kept-open socket carries many commands, each
    // from its own caller, and its upgrade's headers named only the first one's
    ObjectNode trace = ServerClient.JSON.createObjectNode();
    server.injectTraceContext(trace::put);
    if (!trace.isEmpty()) {
      request.set("trace", trace);
    }
    String text = request.toString();
    Thread pump = null;
    Object last = null;
    try {
      ExecConnection pooled = stdin == null ? server.execConnections().take(sandbox) : null;
      if (pooled != null) {
        use(pooled);
        try {
          send(text);
          last = await();
        } catch (WorkspaceException sendFailed) {
          last = Ended.CLOSED_EARLY;
        }
        if (!started && last instanceof Ended) {
          // The pooled socket was closed (in order) before the server took the command: it ran
          // nothing, so the command goes over a new socket. A broken socket is not retried: a
          // "started" the server wrote could have been lost with it.
          pooled.detach();
          pooled.abort();
          outcome = new CompletableFuture<>();
          last = null;
        }
      }
      if (last == null) {
        use(open(server, sandbox, stdin));
        send(text);
        if (stdin != null) {
          pump = Thread.ofVirtual().name("sandbox4j-remote-stdin").start(() -> pumpStdin(stdin));
        }
        last = await();
      }
      return finish(sandbox, last);
    } catch (InterruptedException e) {
      cancel();
      Thread.currentThread().interrupt();
      throw new CancellationException("the command was cancelled; its processes were killed");
    } finally {
      if (pump != null) {
        pump.interrupt(); // it closes stdin when its read returns
      } else {
        closeQuietly(stdin);
      }
      release(last, pump);
    }
  }

  private void use(ExecConnection c) {
    connection = c;
    c.attach(this);
  }

  private ExecConnection open(ServerClient server, String sandbox, InputStream stdin) {
    ExecConnection c = new ExecConnection(sandbox);
    try {
      java.net.http.WebSocket.Builder builder =
          server
              .http()
              .newWebSocketBuilder()
              .header("Authorization", server.authorization())
              .connectTimeout(Duration.ofSeconds(10));
      server.injectTraceContext(builder::header);
      builder
          .buildAsync(server.webSocket("/v1/sandboxes/" + sandbox + "/exec?keepOpen=true"), c)
          .get();
    } catch (InterruptedException e) {
      closeQuietly(stdin);
      Thread.currentThread().interrupt();
      throw new CancellationException("cancelled before the command started");
    } catch (ExecutionException e) {
      closeQuietly(stdin);
      throw handshakeFailure(sandbox, e.getCause());
    }
    return c;
  }

  /**
   * After the command: its connection goes back to the pool if it exited cleanly and nothing of it
   * can still be in flight, else it is dropped.
   */
  private void release(Object last, Thread pump) {
    ExecConnection c = connection;
    if (c == null) {
      return;
    }
    c.detach();
    boolean clean =
        last instanceof Integer
            && !cancelSent
            && callbackFailure == null
            && (pump == null || !pump.isAlive());
    if (clean) {
      backend.server().execConnections().give(c);
    } else {
      c.abort();
    }
  }

  private Object await() throws InterruptedException {
    try {
      if (options.timeout().isPresent()) {
        Duration bound = options.timeout().get().plus(SERVER_GRACE);
        long nanos;
        try {
          nanos = bound.toNanos();
        } catch (ArithmeticException tooLong) {
          nanos = Long.MAX_VALUE;
        }
        try {
          return outcomeWithin(nanos);
        } catch (TimeoutException e) {
          cancel();
          throw new WorkspaceTimeoutException(
              options.timeout().get(), stdoutBytes(), stderrBytes());
        }
      }
      return outcomeWithin(Long.MAX_VALUE);
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (TimeoutException e) {
      throw new IllegalStateException("no deadline, yet timed out", e);
    }
  }

  /**
   * The outcome, waited for at most {@code nanos} ({@code Long.MAX_VALUE}: no bound). A command may
   * be silent for as long as it likes, but the connection must not be: a server that went away
   * without its close reaching us (seen when a server stopped mid-command: the client waited for a
   * close that never came) would leave the caller waiting forever. So while the stream is silent
   * the connection is pinged (after the client's {@link ServerClient#pingInterval}), and a ping
   * unanswered for twice that ends the wait with the connection lost, as if it had broken.
   */
  private Object outcomeWithin(long nanos)
      throws InterruptedException, ExecutionException, TimeoutException {
    long start = System.nanoTime();
    long pingAfterNanos = backend.server().pingInterval().toNanos();
    long pongWaitNanos = 2 * pingAfterNanos;
    while (true) {
      long left = nanos == Long.MAX_VALUE ? Long.MAX_VALUE : nanos - (System.nanoTime() - start);
      if (left <= 0) {
        throw new TimeoutException();
      }
      try {
        return outcome.get(Math.min(left, pingAfterNanos), TimeUnit.NANOSECONDS);
      } catch (TimeoutException silent) {
        ExecConnection c = connection;
        IOException lost = c == null ? null : c.checkAlive(pingAfterNanos, pongWaitNanos, sending);
        if (lost != null) {
          return lost;
        }
      }
    }
  }

  private CommandResult finish(String sandbox, Object last) {
    if (callbackFailure != null) {
      throw callbackFailure;
    }
    if (last instanceof Integer exitCode) {
      return new CommandResult(exitCode, stdoutBytes(), stderrBytes());
    }
    if (last instanceof JsonNode error) {
      String code = ServerClient.text(error, "code");
      switch (code == null ? "" : code) {
        case "timeout" -> {
          Duration timeout =
              options
                  .timeout()
                  .orElse(Duration.ofMillis(Math.max(1, error.path("timeoutMs").asLong(1))));
          throw new WorkspaceTimeoutException(timeout, stdoutBytes(), stderrBytes());
        }
        case "output_limit" -> {
          long limit = error.path("limitBytes").asLong(options.outputLimit());
          throw new WorkspaceOutputLimitException(limit, stdoutBytes(), stderrBytes());
        }
        default ->
            throw backend.server().error(500, error, ServerClient.Target.sandbox(sandbox), null);
      }
    }
    if (last instanceof WorkspaceException malformed) {
      throw malformed;
    }
    if (last instanceof IOException broken) {
      backend.checkStillThere(sandbox);
      throw new WorkspaceException(
          "the server closed the exec stream before the command ended ("
              + ServerClient.describe(broken)
              + ")",
          broken);
    }
    backend.checkStillThere(sandbox);
    throw new WorkspaceException("the server closed the exec stream before the command ended");
  }

  private RuntimeException handshakeFailure(String sandbox, Throwable cause) {
    if (cause instanceof WebSocketHandshakeException h) {
      int status = h.getResponse().statusCode();
      Object body = h.getResponse().body();
      byte[] bytes =
          body instanceof byte[] b
              ? b
              : body instanceof String s
                  ? s.getBytes(java.nio.charset.StandardCharsets.UTF_8)
                  : null;
      return backend.server().error(status, bytes, ServerClient.Target.sandbox(sandbox), null);
    }
    return backend.server().unreachable(cause);
  }

  /** Asks the server to kill the command, then waits (bounded) until it reports the end. */
  private void cancel() {
    boolean asked = false;
    try {
      if (sending.tryLock(1, TimeUnit.SECONDS)) {
        try {
          cancelSent = true;
          connection
              .socket()
              .sendText("{\"type\":\"cancel\"}", true)
              .get(KILL_WAIT.toMillis(), TimeUnit.MILLISECONDS);
          asked = true;
        } finally {
          sending.unlock();
        }
      }
    } catch (InterruptedException | ExecutionException | TimeoutException e) {
      // could not ask: dropping the socket below kills the command as well
    }
    if (!asked) {
      connection.abort();
      return;
    }
    long end = System.nanoTime() + KILL_WAIT.toNanos();
    boolean interrupted = false;
    while (!outcome.isDone() && System.nanoTime() < end) {
      try {
        outcome.get(end - System.nanoTime(), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        interrupted = true; // the caller is already cancelling: finish waiting for the kill
      } catch (ExecutionException | TimeoutException e) {
        break;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private void pumpStdin(InputStream stdin) {
    byte[] buffer = new byte[STDIN_CHUNK];
    try (stdin) {
      int n;
      // read, not readNBytes: a frame goes as soon as the source yields bytes, so a command fed
      // while it runs (a background command's writeStdin) gets each write at once
      while ((n = stdin.read(buffer, 0, buffer.length)) >= 0) {
        if (n > 0) {
          send(
              "{\"type\":\"stdin\",\"data\":\""
                  + Base64.getEncoder().encodeToString(java.util.Arrays.copyOf(buffer, n))
                  + "\"}");
        }
      }
      send("{\"type\":\"stdin_eof\"}");
    } catch (IOException e) {
      if (e instanceof java.io.InterruptedIOException && Thread.currentThread().isInterrupted()) {
        return; // interrupted by run's end: the command is over, nothing reads its stdin now
      }
      fail(new WorkspaceException("reading the command's stdin failed, so it was killed: " + e, e));
    } catch (InterruptedException | RuntimeException e) {
      // the command ended (or the socket did) before all of stdin was sent: nothing reads it now
    }
  }

  private void send(String text) throws InterruptedException {
    sending.lockInterruptibly();
    try {
      connection.socket().sendText(text, true).get();
    } catch (ExecutionException e) {
      throw new WorkspaceException(
          "sending to the exec stream failed: " + ServerClient.describe(e.getCause()),
          e.getCause());
    } finally {
      sending.unlock();
    }
  }

  private void fail(WorkspaceException failure) {
    if (callbackFailure == null) {
      callbackFailure = failure;
    }
    Thread.ofVirtual().start(this::cancel);
  }

  /** One event from the connection ({@code event} null when {@code text} is not JSON). */
  void event(JsonNode event, String text) {
    if (event == null) {
      String head = text.length() > 200 ? text.substring(0, 200) + "…" : text;
      outcome.complete(new WorkspaceException("the server sent a malformed exec event: " + head));
      return;
    }
    try {
      handle(event);
    } catch (RuntimeException e) {
      outcome.complete(
          new WorkspaceException("the server sent a malformed exec event: " + e.getMessage()));
    }
  }

  private void handle(JsonNode event) {
    String type = event.path("type").asText("");
    switch (type) {
      case "stdout", "stderr" -> {
        byte[] chunk = Base64.getDecoder().decode(event.path("data").asText(""));
        if (chunk.length == 0 || outcome.isDone()) {
          return;
        }
        boolean isStderr = type.equals("stderr");
        if (options.retainOutput()) {
          synchronized (this) {
            (isStderr ? stderr : stdout).writeBytes(chunk);
          }
        }
        if (callbackFailure == null) {
          try {
            (isStderr ? onStderr : onStdout).accept(chunk);
          } catch (RuntimeException | Error e) {
            fail(
                new WorkspaceException(
                    "an output callback failed, so the command was killed: " + e, e));
          }
        }
      }
      case "started" -> started = true;
      case "exit" -> outcome.complete(event.path("exitCode").asInt());
      case "error" -> outcome.complete(event.path("error"));
      default -> {
        // a newer server's event this client does not know: ignore it
      }
    }
  }

  /** The socket closed: without an exit or error event, the command's fate is unknown. */
  void closed() {
    outcome.complete(Ended.CLOSED_EARLY);
  }

  /** The socket broke. */
  void failed(IOException error) {
    outcome.complete(error);
  }

  private synchronized byte[] stdoutBytes() {
    return stdout.toByteArray();
  }

  private synchronized byte[] stderrBytes() {
    return stderr.toByteArray();
  }

  private static void closeQuietly(InputStream in) {
    if (in != null) {
      try {
        in.close();
      } catch (IOException ignored) {
        // closing is a courtesy here
      }
    }
  }
}
