package dev.sandbox4j.remote;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.SupportsRealpath;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One sandbox on a server, created on first use (or attached to by id). State: {@link #created} is
 * null until the first operation creates or attaches, then fixed; creation runs under {@code this}
 * so concurrent first use creates exactly one sandbox.
 */
final class RemoteBackend
    implements WorkspaceBackend, SupportsCommands, SupportsFileSystem, SupportsRealpath {

  /** The sandbox once created or attached to. */
  private record Created(String id, String workingDirectory, boolean changeDirectory) {}

  /** File content up to this size is written from memory, so that the request can be resent. */
  private static final int BUFFERED_WRITE = 8 * 1024 * 1024;

  private final RemoteSandbox provider;
  private final String attachTo;
  private volatile Created created;

  RemoteBackend(RemoteSandbox provider, String attachTo) {
    this.provider = provider;
    this.attachTo = attachTo;
  }

  ServerClient server() {
    return provider.server();
  }

  @Override
  public Optional<WorkspaceRef> ref() {
    if (attachTo != null) {
      return Optional.of(new WorkspaceRef(RemoteSandbox.NAME, attachTo));
    }
    Created c = created;
    return c == null ? Optional.empty() : Optional.of(new WorkspaceRef(RemoteSandbox.NAME, c.id()));
  }

  @Override
  public String workingDirectory() {
    return sandbox().workingDirectory();
  }

  private Created sandbox() {
    Created c = created;
    if (c != null) {
      return c;
    }
    synchronized (this) {
      if (created == null) {
        if (attachTo == null) {
          provider.beforeCreate.run();
        }
        SandboxInfo info =
            attachTo != null
                ? RemoteSandbox.info(
                    server()
                        .call(
                            "GET",
                            "/v1/sandboxes/" + attachTo,
                            null,
                            ServerClient.Target.sandbox(attachTo)))
                : server()
                    .telemetry()
                    .lifecycle(
                        "create",
                        RemoteSandbox.NAME,
                        null,
                        () -> {
                          SandboxInfo made =
                              RemoteSandbox.info(
                                  server()
                                      .call(
                                          "POST",
                                          "/v1/sandboxes",
                                          provider.createRequest(),
                                          ServerClient.Target.NONE));
                          SandboxTelemetry.tagWorkspaceId(made.ref().id());
                          return made;
                        });
        // A provider built with a working directory attaches with it, as the local engine's does:
        // the server keeps the sandbox's own, so each command changes into this one first.
        String wanted = attachTo != null ? provider.workingDirectoryOption() : null;
        created =
            wanted == null || wanted.equals(info.workingDirectory())
                ? new Created(info.ref().id(), info.workingDirectory(), false)
                : new Created(info.ref().id(), wanted, true);
      }
      return created;
    }
  }

  private String id() {
    return sandbox().id();
  }

  /** Raises unavailable if the sandbox is gone; returns quietly if it is there or unknown. */
  void checkStillThere(String id) {
    try {
      server().call("GET", "/v1/sandboxes/" + id, null, ServerClient.Target.sandbox(id));
    } catch (WorkspaceUnavailableException gone) {
      throw gone;
    } catch (RuntimeException unknown) {
      // the server cannot say (down, restarting): the caller reports the cut stream
    }
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    Objects.requireNonNull(command, "command");
    Objects.requireNonNull(options, "options");
    Created sandbox = sandbox();
    Command toRun = command;
    if (sandbox.changeDirectory()) {
      List<String> argv =
          new ArrayList<>(List.of("/bin/sh", "-c", "cd \"$1\" || exit; shift; exec \"$@\"", "sh"));
      argv.add(sandbox.workingDirectory());
      argv.addAll(command.toArgv());
      toRun = Command.argv(argv);
    }
    return new ExecCall(this, options).run(sandbox.id(), toRun);
  }

  // ---- files ----------------------------------------------------------------------------------

  private String fileRoute(String id, String what, String path) {
    return "/v1/sandboxes/" + id + "/files/" + what + "?path=" + ServerClient.query(path);
  }

  @Override
  public InputStream openRead(String path) {
    String id = id();
    HttpRequest request = server().request(fileRoute(id, "content", path)).GET().build();
    return server().stream(request, ServerClient.Target.file(id, path));
  }

  @Override
  public void write(String path, InputStream content) {
    Objects.requireNonNull(content, "content");
    String id = id();
    HttpResponse<byte[]> response;
    try (content) {
      HttpRequest request =
          server()
              .request(fileRoute(id, "content", path))
              .header("Content-Type", "application/octet-stream")
              .PUT(body(content))
              .build();
      response = server().send(request, HttpResponse.BodyHandlers.ofByteArray());
    } catch (IOException e) {
      throw new UncheckedIOException("reading the content to write to " + path, e);
    }
    if (response.statusCode() / 100 != 2) {
      throw server()
          .error(
              response.statusCode(),
              response.body(),
              ServerClient.Target.file(id, path),
              response.headers().firstValue("Retry-After").orElse(null));
    }
  }

  /**
   * The body of a file write. The JDK client resends an idempotent request (a PUT) when a pooled
   * connection turns out to be closed, and a resend reads the body again: a stream can be read only
   * once, so a resend would write an empty file. Content up to {@link #BUFFERED_WRITE} bytes is
   * therefore sent from memory (resendable, with a length); a larger stream is sent as it is read,
   * and a resend fails the write instead of truncating the file.
   */
  private static HttpRequest.BodyPublisher body(InputStream content) throws IOException {
    byte[] head = content.readNBytes(BUFFERED_WRITE + 1);
    if (head.length <= BUFFERED_WRITE) {
      return HttpRequest.BodyPublishers.ofByteArray(head);
    }
    java.util.concurrent.atomic.AtomicBoolean taken =
        new java.util.concurrent.atomic.AtomicBoolean();
    return HttpRequest.BodyPublishers.ofInputStream(
        () -> {
          if (taken.getAndSet(true)) {
            throw new UncheckedIOException(
                new IOException(
                    "the connection to the server dropped while streaming a file; a stream cannot"
                        + " be sent twice, so the write failed and nothing was truncated"));
          }
          return new java.io.SequenceInputStream(new java.io.ByteArrayInputStream(head), content);
        });
  }

  @Override
  public FileStat stat(String path) {
    String id = id();
    JsonNode stat =
        server().call("GET", fileRoute(id, "stat", path), null, ServerClient.Target.file(id, path));
    return new FileStat(
        path,
        type(stat.path("type").asText()),
        Math.max(0, stat.path("size").asLong()),
        stat.path("permissions").asInt() & 07777,
        modified(stat.path("modified")));
  }

  private static Instant modified(JsonNode value) {
    if (value.isNumber()) {
      return Instant.ofEpochMilli(value.asLong());
    }
    if (value.isTextual()) {
      try {
        return Instant.parse(value.asText());
      } catch (java.time.format.DateTimeParseException e) {
        throw new WorkspaceException("the server sent a bad modification time: " + value);
      }
    }
    return Instant.EPOCH;
  }

  private static FileType type(String name) {
    try {
      return FileType.valueOf(name);
    } catch (IllegalArgumentException e) {
      return FileType.OTHER;
    }
  }

  @Override
  public List<DirectoryEntry> list(String path) {
    String id = id();
    JsonNode answer =
        server().call("GET", fileRoute(id, "list", path), null, ServerClient.Target.file(id, path));
    List<DirectoryEntry> entries = new ArrayList<>();
    for (JsonNode e : answer.path("entries")) {
      entries.add(
          new DirectoryEntry(
              e.path("name").asText(),
              type(e.path("type").asText()),
              Math.max(0, e.path("size").asLong())));
    }
    return entries;
  }

  @Override
  public void createDirectories(String path) {
    String id = id();
    ObjectNode body = ServerClient.JSON.createObjectNode().put("path", path);
    server()
        .call(
            "POST",
            "/v1/sandboxes/" + id + "/files/mkdir",
            body,
            ServerClient.Target.file(id, path));
  }

  @Override
  public void remove(String path, boolean recursive) {
    String id = id();
    ObjectNode body =
        ServerClient.JSON.createObjectNode().put("path", path).put("recursive", recursive);
    server()
        .call(
            "POST",
            "/v1/sandboxes/" + id + "/files/remove",
            body,
            ServerClient.Target.file(id, path));
  }

  @Override
  public void rename(String from, String to) {
    String id = id();
    ObjectNode body = ServerClient.JSON.createObjectNode().put("from", from).put("to", to);
    server()
        .call(
            "POST",
            "/v1/sandboxes/" + id + "/files/rename",
            body,
            ServerClient.Target.file(id, from));
  }

  @Override
  public String realpath(String path) {
    String id = id();
    JsonNode answer =
        server()
            .call("GET", fileRoute(id, "realpath", path), null, ServerClient.Target.file(id, path));
    return answer.path("path").asText();
  }

  @Override
  public String toString() {
    return "RemoteBackend[" + ref().map(WorkspaceRef::toString).orElse("not created") + "]";
  }
}
