package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * envd's {@code WatchDir} by polling: the sandbox's files are reached through the engine's files
 * API, which has no change notifications, so the directory (and, recursive, its subdirectories, up
 * to {@link #MAX_ENTRIES} entries) is listed every {@link #INTERVAL_MS} ms and compared. A new name
 * is {@code CREATE}, a gone one {@code REMOVE}, a changed size or type {@code WRITE}; a rewrite
 * that keeps the size, a chmod, and a rename (seen as REMOVE and CREATE) are not told apart.
 */
final class E2bWatch {

  static final long INTERVAL_MS = 200;
  static final int MAX_ENTRIES = 10_000;

  private record Seen(FileType type, long size) {}

  void watch(
      Workspace ws,
      String dir,
      boolean recursive,
      HttpServletRequest request,
      HttpServletResponse response,
      E2bConnect.Codec codec)
      throws IOException {
    if (!codec.streaming()) {
      throw E2bConnect.invalid(
          "filesystem.Filesystem/WatchDir is server-streaming: send " + E2bConnect.STREAM_JSON);
    }
    if (!ws.stat(dir).isDirectory()) {
      throw E2bConnect.invalid("path '" + dir + "' is not a directory");
    }
    long deadline = deadline(request);
    Map<String, Seen> before = snapshot(ws, dir, recursive);
    E2bConnect.Stream out = new E2bConnect.Stream(response, codec);
    ObjectNode start = Json.object();
    start.putObject("start"); // the oneof's fields are the message's own in JSON
    out.send(start);
    long lastSent = System.nanoTime();
    while (System.nanoTime() < deadline) {
      try {
        Thread.sleep(INTERVAL_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      Map<String, Seen> now;
      try {
        now = snapshot(ws, dir, recursive);
      } catch (WorkspaceException e) {
        // the directory or the sandbox is gone: the watch ends as envd's does
        out.end(new E2bConnect.RpcException("not_found", e.getMessage()));
        return;
      }
      boolean sent = false;
      for (Map.Entry<String, Seen> e : now.entrySet()) {
        Seen old = before.get(e.getKey());
        if (old == null) {
          sent |= event(out, e.getKey(), "EVENT_TYPE_CREATE");
        } else if (!Objects.equals(old, e.getValue())) {
          sent |= event(out, e.getKey(), "EVENT_TYPE_WRITE");
        }
      }
      for (String gone : before.keySet()) {
        if (!now.containsKey(gone)) {
          sent |= event(out, gone, "EVENT_TYPE_REMOVE");
        }
      }
      before = now;
      if (sent) {
        lastSent = System.nanoTime();
      } else if (System.nanoTime() - lastSent > 30_000_000_000L) {
        ObjectNode k = Json.object();
        k.putObject("keepalive");
        out.send(k); // also how a client that went away is noticed
        lastSent = System.nanoTime();
      }
    }
    out.end(null);
  }

  private static boolean event(E2bConnect.Stream out, String name, String type) throws IOException {
    ObjectNode o = Json.object();
    o.putObject("filesystem").put("name", name).put("type", type);
    out.send(o);
    return true;
  }

  private static long deadline(HttpServletRequest request) {
    String header = request.getHeader("Connect-Timeout-Ms");
    long ms = Long.MAX_VALUE / 4;
    if (header != null) {
      try {
        ms = Math.max(1, Long.parseLong(header.trim()));
      } catch (NumberFormatException e) {
        throw E2bConnect.invalid("Connect-Timeout-Ms must be a positive integer");
      }
    }
    return System.nanoTime() + Math.min(ms, Long.MAX_VALUE / 4_000_000L) * 1_000_000L;
  }

  /** Names relative to {@code dir}, as envd reports them. */
  private static Map<String, Seen> snapshot(Workspace ws, String dir, boolean recursive) {
    Map<String, Seen> out = new HashMap<>();
    walk(ws, dir, "", recursive, out);
    return out;
  }

  private static void walk(
      Workspace ws, String dir, String prefix, boolean recursive, Map<String, Seen> out) {
    for (DirectoryEntry e : ws.list(dir)) {
      if (out.size() >= MAX_ENTRIES) {
        return;
      }
      String name = prefix + e.name();
      out.put(name, new Seen(e.type(), e.type() == FileType.DIRECTORY ? 0 : e.size()));
      if (recursive && e.type() == FileType.DIRECTORY) {
        walk(ws, (dir.equals("/") ? "" : dir) + "/" + e.name(), name + "/", true, out);
      }
    }
  }
}
