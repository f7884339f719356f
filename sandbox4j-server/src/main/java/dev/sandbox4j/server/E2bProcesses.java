package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * envd's {@code process.Process} service over a sandbox's {@link Workspace}: each started process
 * is a {@link BackgroundCommand}, so it outlives the stream that started it (as envd's do), and
 * gets a pid of this server's own numbering (the sandbox's real pids are not known here). Output
 * goes to every stream attached to the process ({@code Start}, then any {@code Connect}), from when
 * it attached. A PTY is not supported: Sandbox4j's exec has none over this path.
 */
final class E2bProcesses {

  /** Longest gap between keepalive events, whatever the client asks for. */
  private static final long MAX_KEEPALIVE_SECONDS = 50;

  private final Map<String, Map<Integer, Proc>> bySandbox = new ConcurrentHashMap<>();
  private final AtomicInteger nextPid = new AtomicInteger(1000);

  /** A running process and the streams attached to it. */
  private static final class Proc {
    final int pid;
    final String tag;
    final JsonNode config;
    final boolean stdin;
    final List<BlockingQueue<Event>> watchers = new CopyOnWriteArrayList<>();
    volatile Job command;
    volatile boolean killed;

    Proc(int pid, String tag, JsonNode config, boolean stdin) {
      this.pid = pid;
      this.tag = tag;
      this.config = config;
      this.stdin = stdin;
    }

    void publish(Event e) {
      watchers.forEach(q -> q.add(e));
    }
  }

  /** Output of a process, or its end ({@code stream} null). */
  private record Event(String stream, byte[] bytes) {}

  private static final Event ENDED = new Event(null, null);

  /** Forgets a destroyed sandbox's processes (they died with it). */
  void forget(String sandboxId) {
    bySandbox.remove(sandboxId);
  }

  void handle(
      String method,
      Workspace ws,
      String sandboxId,
      E2bUsers.User user,
      HttpServletRequest request,
      HttpServletResponse response)
      throws IOException {
    E2bConnect.Codec codec = E2bConnect.codec(request, "process.Process", method);
    JsonNode in = E2bConnect.readRequest(request, codec);
    Map<Integer, Proc> procs = bySandbox.computeIfAbsent(sandboxId, k -> new ConcurrentHashMap<>());
    switch (method) {
      case "Start" -> start(ws, procs, user, in, request, response, codec);
      case "Connect" -> attach(select(procs, in.path("process")), request, response, codec);
      case "List" -> E2bConnect.unary(response, codec, list(procs));
      case "SendInput" -> {
        Proc p = select(procs, in.path("process"));
        JsonNode input = in.path("input");
        if (input.has("pty")) {
          throw new E2bConnect.RpcException(
              "unimplemented", "no PTY: this server runs commands without a terminal");
        }
        byte[] bytes = base64(input.path("stdin").asText(""));
        writeStdin(p, bytes);
        E2bConnect.unary(response, codec, Json.object());
      }
      case "CloseStdin" -> {
        Proc p = select(procs, in.path("process"));
        if (!p.stdin) {
          throw new E2bConnect.RpcException(
              "failed_precondition", "process " + p.pid + " was started without stdin");
        }
        p.command.closeStdin();
        E2bConnect.unary(response, codec, Json.object());
      }
      case "SendSignal" -> {
        Proc p = select(procs, in.path("process"));
        signal(p, in.path("signal").asText(""));
        E2bConnect.unary(response, codec, Json.object());
      }
      case "Update" ->
          throw new E2bConnect.RpcException(
              "unimplemented", "no PTY to resize: this server runs commands without a terminal");
      case "StreamInput" ->
          throw new E2bConnect.RpcException(
              "unimplemented", "StreamInput (client streaming) is not supported: use SendInput");
      default ->
          throw new E2bConnect.RpcException("unimplemented", "no method process.Process/" + method);
    }
  }

  private void start(
      Workspace ws,
      Map<Integer, Proc> procs,
      E2bUsers.User user,
      JsonNode in,
      HttpServletRequest request,
      HttpServletResponse response,
      E2bConnect.Codec codec)
      throws IOException {
    if (!codec.streaming()) {
      throw E2bConnect.invalid(
          "process.Process/Start is server-streaming: send " + E2bConnect.STREAM_JSON);
    }
    if (in.hasNonNull("pty")) {
      throw new E2bConnect.RpcException(
          "unimplemented", "no PTY: this server runs commands without a terminal");
    }
    JsonNode config = in.path("process");
    String cmd = config.path("cmd").asText("");
    if (cmd.isEmpty() || cmd.indexOf('\0') >= 0) {
      throw E2bConnect.invalid(
          "process.cmd must be a program, was '" + Sandboxes.printable(cmd) + "'");
    }
    List<String> argv = new ArrayList<>();
    String cwd = config.hasNonNull("cwd") ? config.get("cwd").asText() : null;
    if (cwd != null && !cwd.isEmpty()) {
      Call.checkPath("cwd", cwd);
      // the engine runs every command in the sandbox's working directory: change it first, failing
      // as envd does when the directory is missing
      argv.addAll(
          List.of("/bin/sh", "-c", "cd -- \"$1\" || exit 1; shift; exec \"$@\"", "sh", cwd));
    }
    argv.addAll(user.wrap());
    argv.add(cmd);
    config.path("args").forEach(a -> argv.add(a.asText()));
    RunOptions.Builder options = RunOptions.builder();
    Map<String, String> env = new LinkedHashMap<>(user.env());
    config.path("envs").properties().forEach(e -> env.put(e.getKey(), e.getValue().asText()));
    options.env(env);
    Duration deadline = deadline(request);
    if (deadline != null) {
      options.timeout(deadline);
    } else {
      options.noTimeout();
    }
    boolean stdin = in.path("stdin").asBoolean(false);
    options.keepStdinOpen(stdin);
    String tag = in.hasNonNull("tag") ? in.get("tag").asText() : null;
    Proc p = new Proc(nextPid.getAndIncrement(), tag, config, stdin);
    BlockingQueue<Event> queue = new LinkedBlockingQueue<>();
    p.watchers.add(queue);
    options.onStdout(b -> p.publish(new Event("stdout", b)));
    options.onStderr(b -> p.publish(new Event("stderr", b)));
    Command command;
    try {
      command = Command.argv(argv);
    } catch (IllegalArgumentException e) {
      throw E2bConnect.invalid(e.getMessage());
    }
    procs.put(p.pid, p);
    try {
      p.command =
          stdin
              ? new Background(ws.start(command, options.build()))
              : new Direct(ws, command, options.build());
    } catch (RuntimeException e) {
      procs.remove(p.pid);
      throw e;
    }
    Thread.ofVirtual()
        .name("e2b-process-" + p.pid)
        .start(
            () -> {
              try {
                p.command.await();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
              procs.remove(p.pid);
              p.publish(ENDED);
            });
    stream(p, queue, request, response, codec);
  }

  private void attach(
      Proc p, HttpServletRequest request, HttpServletResponse response, E2bConnect.Codec codec)
      throws IOException {
    if (!codec.streaming()) {
      throw E2bConnect.invalid(
          "process.Process/Connect is server-streaming: send " + E2bConnect.STREAM_JSON);
    }
    BlockingQueue<Event> queue = new LinkedBlockingQueue<>();
    p.watchers.add(queue);
    if (!p.command.isRunning()) {
      queue.add(ENDED);
    }
    stream(p, queue, request, response, codec);
  }

  /**
   * Streams a process's events to one client: start, output, keepalives while silent, and the end.
   * A client that goes away detaches; the process runs on. A sandbox that goes away mid-command
   * drops the stream, as envd's does when its machine dies.
   */
  private static void stream(
      Proc p,
      BlockingQueue<Event> queue,
      HttpServletRequest request,
      HttpServletResponse response,
      E2bConnect.Codec codec)
      throws IOException {
    E2bConnect.Stream out = new E2bConnect.Stream(response, codec);
    long keepAlive = keepAliveSeconds(request);
    try {
      ObjectNode start = Json.object();
      start.putObject("event").putObject("start").put("pid", p.pid);
      out.send(start);
      while (true) {
        Event e;
        try {
          e = queue.poll(keepAlive, TimeUnit.SECONDS);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new IOException("interrupted", ie);
        }
        if (e == null) {
          ObjectNode k = Json.object();
          k.putObject("event").putObject("keepalive");
          out.send(k);
        } else if (e == ENDED) {
          break;
        } else {
          ObjectNode data = Json.object();
          data.putObject("event").putObject("data").put(e.stream(), e.bytes());
          out.send(data);
        }
      }
      Job c = p.command;
      java.util.Optional<WorkspaceException> failure = c.failure();
      if (failure.isPresent()) {
        if (failure.get() instanceof WorkspaceTimeoutException t) {
          out.end(new E2bConnect.RpcException("deadline_exceeded", t.getMessage()));
          return;
        }
        throw new IOException(
            "the sandbox went away during the command: " + failure.get().getMessage());
      }
      int code = c.exitCode().orElse(-1);
      ObjectNode end = Json.object();
      ObjectNode e = end.putObject("event").putObject("end");
      if (p.killed) {
        e.put("exitCode", -1).put("exited", false).put("status", "signal: killed");
      } else {
        e.put("exitCode", code).put("exited", true).put("status", "exit status " + code);
      }
      out.send(end);
      out.end(null);
    } finally {
      p.watchers.remove(queue);
    }
  }

  /**
   * A started process. With stdin it is a {@link BackgroundCommand} (whose kept-open stdin the
   * server writes to); without, a plain run on a virtual thread ({@link Direct}), which spares the
   * background launcher's session leader and pid file: two execs fewer per command.
   */
  private interface Job {
    boolean isRunning();

    void await() throws InterruptedException;

    java.util.OptionalInt exitCode();

    java.util.Optional<WorkspaceException> failure();

    void kill() throws InterruptedException;

    /** SIGTERM with {@code grace}, then kill. */
    void stop(Duration grace) throws InterruptedException;

    void writeStdin(byte[] bytes) throws InterruptedException;

    void closeStdin();
  }

  private record Background(BackgroundCommand c) implements Job {
    @Override
    public boolean isRunning() {
      return c.isRunning();
    }

    @Override
    public void await() throws InterruptedException {
      while (!c.await(Duration.ofHours(1))) {
        // runs on: a process has no end of its own here
      }
    }

    @Override
    public java.util.OptionalInt exitCode() {
      return c.exitCode();
    }

    @Override
    public java.util.Optional<WorkspaceException> failure() {
      return c.failure();
    }

    @Override
    public void kill() throws InterruptedException {
      c.kill();
    }

    @Override
    public void stop(Duration grace) throws InterruptedException {
      c.stop(grace);
    }

    @Override
    public void writeStdin(byte[] bytes) throws InterruptedException {
      c.writeStdin(bytes);
    }

    @Override
    public void closeStdin() {
      c.closeStdin();
    }
  }

  /** A run whose stdin is empty; interrupting its thread kills what it started (the engine's). */
  private static final class Direct implements Job {
    private final java.util.concurrent.CompletableFuture<Integer> exit =
        new java.util.concurrent.CompletableFuture<>();
    private final Thread runner;

    Direct(Workspace ws, Command command, RunOptions options) {
      ws.open(); // attach (and wake) here, so that a gone sandbox fails the call, not the stream
      runner =
          Thread.ofVirtual()
              .name("e2b-run")
              .start(
                  () -> {
                    try {
                      exit.complete(ws.run(command, options).exitCode());
                    } catch (java.util.concurrent.CancellationException killed) {
                      exit.complete(137);
                    } catch (RuntimeException e) {
                      exit.completeExceptionally(e);
                    }
                  });
    }

    @Override
    public boolean isRunning() {
      return !exit.isDone();
    }

    @Override
    public void await() throws InterruptedException {
      try {
        exit.get();
      } catch (java.util.concurrent.ExecutionException e) {
        // ended with a failure: failure() says which
      }
    }

    @Override
    public java.util.OptionalInt exitCode() {
      return exit.isDone() && !exit.isCompletedExceptionally()
          ? java.util.OptionalInt.of(exit.join())
          : java.util.OptionalInt.empty();
    }

    @Override
    public java.util.Optional<WorkspaceException> failure() {
      if (!exit.isCompletedExceptionally()) {
        return java.util.Optional.empty();
      }
      try {
        exit.join();
        return java.util.Optional.empty();
      } catch (java.util.concurrent.CompletionException e) {
        return java.util.Optional.of(
            e.getCause() instanceof WorkspaceException w
                ? w
                : new WorkspaceException(String.valueOf(e.getCause()), e.getCause()));
      }
    }

    @Override
    public void kill() throws InterruptedException {
      if (isRunning()) {
        runner.interrupt();
        await();
      }
    }

    @Override
    public void stop(Duration grace) throws InterruptedException {
      // no process group id is known without the background launcher: SIGTERM is a kill here
      kill();
    }

    @Override
    public void writeStdin(byte[] bytes) {
      throw new IllegalStateException("the process was started without stdin");
    }

    @Override
    public void closeStdin() {
      throw new IllegalStateException("the process was started without stdin");
    }
  }

  private static Duration deadline(HttpServletRequest request) {
    String header = request.getHeader("Connect-Timeout-Ms");
    if (header == null) {
      return null;
    }
    try {
      long ms = Long.parseLong(header.trim());
      if (ms <= 0 || header.trim().length() > 10) {
        throw new NumberFormatException();
      }
      return Duration.ofMillis(ms);
    } catch (NumberFormatException e) {
      throw E2bConnect.invalid("Connect-Timeout-Ms must be a positive integer of up to 10 digits");
    }
  }

  private static long keepAliveSeconds(HttpServletRequest request) {
    String header = request.getHeader("Keepalive-Ping-Interval");
    try {
      long s = header == null ? MAX_KEEPALIVE_SECONDS : Long.parseLong(header.trim());
      return Math.max(1, Math.min(s, MAX_KEEPALIVE_SECONDS));
    } catch (NumberFormatException e) {
      return MAX_KEEPALIVE_SECONDS;
    }
  }

  private static Proc select(Map<Integer, Proc> procs, JsonNode selector) {
    if (selector.has("pid")) {
      long pid = selector.path("pid").asLong(-1);
      Proc p = pid < 0 || pid > Integer.MAX_VALUE ? null : procs.get((int) pid);
      if (p == null) {
        throw E2bConnect.notFound("process with pid " + pid + " not found");
      }
      return p;
    }
    if (selector.has("tag")) {
      String tag = selector.path("tag").asText();
      return procs.values().stream()
          .filter(p -> tag.equals(p.tag))
          .findFirst()
          .orElseThrow(
              () ->
                  E2bConnect.notFound(
                      "process with tag '" + Sandboxes.printable(tag) + "' not found"));
    }
    throw E2bConnect.invalid("process selector needs pid or tag");
  }

  private static JsonNode list(Map<Integer, Proc> procs) {
    ObjectNode out = Json.object();
    ArrayNode list = out.putArray("processes");
    procs.values().stream()
        .filter(p -> p.command != null && p.command.isRunning())
        .forEach(
            p -> {
              ObjectNode o = list.addObject();
              o.set("config", p.config);
              o.put("pid", p.pid);
              if (p.tag != null) {
                o.put("tag", p.tag);
              }
            });
    return out;
  }

  private static void writeStdin(Proc p, byte[] bytes) {
    if (!p.stdin) {
      throw new E2bConnect.RpcException(
          "failed_precondition", "process " + p.pid + " was started without stdin");
    }
    try {
      p.command.writeStdin(bytes);
    } catch (IllegalStateException e) {
      throw new E2bConnect.RpcException("failed_precondition", e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new E2bConnect.RpcException("canceled", "interrupted while writing stdin");
    }
  }

  private static void signal(Proc p, String signal) {
    switch (signal) {
      case "SIGNAL_SIGKILL", "9" -> {
        p.killed = true;
        try {
          p.command.kill();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      case "SIGNAL_SIGTERM", "15" ->
          Thread.ofVirtual()
              .start(
                  () -> {
                    try {
                      p.command.stop(Duration.ofSeconds(10));
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                    }
                  });
      default ->
          throw E2bConnect.invalid(
              "signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL, was '"
                  + Sandboxes.printable(signal)
                  + "'");
    }
  }

  private static byte[] base64(String s) {
    try {
      return Base64.getDecoder().decode(s);
    } catch (IllegalArgumentException e) {
      throw E2bConnect.invalid("input.stdin must be base64 (protobuf JSON bytes)");
    }
  }
}
