package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.io.IOException;
import java.time.Duration;
import java.util.Base64;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The routes of background commands: start one, write to its stdin, poll its output and state, stop
 * it; and the commands the server started, by id, until their last state is collected or their
 * sandbox goes.
 */
final class CommandRoutes {

  static final int MAX_COMMANDS_PER_ORGANIZATION = 100;

  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();

  private final Sandboxes sandboxes;
  private final Map<String, Background> commands = new ConcurrentHashMap<>();

  /**
   * A background command and whose it is. {@code writing} is set while a stdin write waits for the
   * command to read: one at a time, so that what waits in memory per command is bounded by one
   * request body besides the command's own stdin buffer.
   */
  private record Background(
      long organization, String sandbox, BackgroundCommand command, AtomicBoolean writing) {}

  /** The body of the stdin route: base64 bytes to write, then EOF if {@code eof}. */
  record StdinRequest(String data, Boolean eof) {}

  CommandRoutes(Sandboxes sandboxes) {
    this.sandboxes = sandboxes;
  }

  void startCommand(Call c) throws IOException {
    ExecRequest request = c.body(ExecRequest.class, null);
    var command = request.command();
    RunOptions.Builder options = request.options().retainOutput(true);
    byte[] stdin = request.stdinBytes();
    if (stdin != null) {
      options.stdin(stdin);
    }
    options.keepStdinOpen(request.keepsStdinOpen(true));
    String sandbox = c.param("id");
    Workspace ws = sandboxes.workspace(c.organization, sandbox);
    long organization = c.organization.id();
    // each holds up to 1 MiB of unread output in memory: bound how many one organization keeps
    if (commands.values().stream().filter(b -> b.organization() == organization).count()
        >= MAX_COMMANDS_PER_ORGANIZATION) {
      throw new ApiException(
          ErrorCode.QUOTA_EXCEEDED,
          "the organization has "
              + MAX_COMMANDS_PER_ORGANIZATION
              + " background commands not yet collected: stop some, or GET them until they end",
          null,
          null,
          null);
    }
    BackgroundCommand started = ws.start(command, options.build());
    byte[] idBytes = new byte[12];
    RANDOM.nextBytes(idBytes);
    String id = HexFormat.of().formatHex(idBytes);
    commands.put(id, new Background(c.organization.id(), sandbox, started, new AtomicBoolean()));
    c.json(201, Json.object().put("id", id));
  }

  private Background command(Call c) {
    String sandbox = sandboxes.owned(c.organization, c.param("id")).id();
    Background b = commands.get(c.param("cid"));
    if (b == null || b.organization() != c.organization.id() || !b.sandbox().equals(sandbox)) {
      throw ApiException.notFound("no command '" + Sandboxes.printable(c.param("cid")) + "'");
    }
    return b;
  }

  /**
   * Writes the body's bytes to the command's stdin, then closes it if asked; answers once the bytes
   * are buffered for the command (waiting while it does not read, as {@link
   * BackgroundCommand#writeStdin} does).
   */
  void writeStdin(Call c) throws IOException, InterruptedException {
    StdinRequest request = c.body(StdinRequest.class, null);
    if (request.data() == null && !Boolean.TRUE.equals(request.eof())) {
      throw ApiException.invalid("data", "give data (base64), \"eof\": true, or both");
    }
    byte[] bytes;
    try {
      bytes = request.data() == null ? null : Base64.getDecoder().decode(request.data());
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid("data", "data is not valid base64: " + e.getMessage());
    }
    Background b = command(c);
    if (!b.writing().compareAndSet(false, true)) {
      throw new ApiException(
          ErrorCode.STDIN_BUSY,
          "an earlier write to the stdin of command '"
              + c.param("cid")
              + "' still waits for it to read: send the next once that one is answered",
          null,
          null,
          null);
    }
    try {
      if (bytes != null) {
        b.command().writeStdin(bytes);
      }
      if (Boolean.TRUE.equals(request.eof())) {
        b.command().closeStdin();
      }
    } catch (IllegalStateException e) {
      throw new ApiException(ErrorCode.STDIN_CLOSED, e.getMessage(), null, null, null);
    } finally {
      b.writing().set(false);
    }
    c.noContent();
  }

  void pollCommand(Call c) throws IOException {
    Background b = command(c);
    ObjectNode body = commandState(c.param("cid"), b.command());
    // Forgotten only once this answer says it ended: asking isRunning() again could see an end
    // that came after the answer was made, and the client, told "running", would never see the
    // exit (the next poll was a 404: ServerApiTest failed so once in CI).
    if (!body.get("running").asBoolean()) {
      commands.remove(c.param("cid"), b); // its last output is in this answer
    }
    c.json(200, body);
  }

  void stopCommand(Call c) throws IOException, InterruptedException {
    Background b = command(c);
    b.command().stop(Duration.ofSeconds(2));
    b.command().await(Duration.ofSeconds(10));
    ObjectNode body = commandState(c.param("cid"), b.command());
    commands.remove(c.param("cid"), b);
    c.json(200, body);
  }

  private static ObjectNode commandState(String id, BackgroundCommand command) {
    boolean running = command.isRunning();
    BackgroundCommand.Output output = command.takeOutput();
    ObjectNode body = Json.object();
    body.put("id", id);
    body.put("running", running);
    if (!running && command.exitCode().isPresent()) {
      body.put("exitCode", command.exitCode().getAsInt());
    } else {
      body.putNull("exitCode");
    }
    body.put("stdout", Base64.getEncoder().encodeToString(output.stdout()));
    body.put("stderr", Base64.getEncoder().encodeToString(output.stderr()));
    body.put("droppedBytes", output.droppedBytes());
    Optional<WorkspaceException> failure = running ? Optional.empty() : command.failure();
    if (failure.isPresent()) {
      ApiException mapped = ApiServlet.map(failure.get());
      ErrorCode code =
          switch (failure.get()) {
            case dev.sandbox4j.workspace.WorkspaceOutputLimitException l -> ErrorCode.OUTPUT_LIMIT;
            default -> mapped.code;
          };
      ObjectNode error = body.putObject("error");
      error.put("code", code.spelling());
      error.put("message", failure.get().getMessage());
      if (failure.get() instanceof WorkspaceTimeoutException t) {
        error.put("timeoutMs", t.timeout().toMillis());
      }
      if (failure.get() instanceof dev.sandbox4j.workspace.WorkspaceOutputLimitException l) {
        error.put("limitBytes", l.limit());
      }
    } else {
      body.putNull("error");
    }
    return body;
  }

  /** Kills the background commands started through this server: it is going away. */
  void killCommands() {
    for (Background b : commands.values()) {
      try {
        b.command().kill();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } catch (RuntimeException e) {
        // already gone
      }
    }
    commands.clear();
  }

  /** Forgets the commands of sandbox {@code id}: it was deleted. */
  void forgetSandbox(String id) {
    commands.values().removeIf(b -> b.sandbox().equals(id));
  }
}
