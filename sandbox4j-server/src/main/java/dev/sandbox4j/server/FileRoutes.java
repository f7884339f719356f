package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.Workspace;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

/**
 * The routes of files inside a sandbox: read, write, stat, list, realpath, mkdir, remove, rename.
 */
final class FileRoutes {

  private final Sandboxes sandboxes;

  FileRoutes(Sandboxes sandboxes) {
    this.sandboxes = sandboxes;
  }

  private Workspace workspace(Call c) {
    return sandboxes.workspace(c.organization, c.param("id"));
  }

  void readFile(Call c) throws IOException {
    String path = c.pathQuery();
    Workspace ws = workspace(c);
    try (InputStream in = ws.openRead(path)) {
      // the first chunk before the status line: a failure to read is still a JSON error
      byte[] first = in.readNBytes(64 * 1024);
      c.response.setStatus(200);
      c.response.setContentType("application/octet-stream");
      OutputStream out = c.response.getOutputStream();
      out.write(first);
      in.transferTo(out);
    }
  }

  void writeFile(Call c) throws IOException {
    String path = c.pathQuery();
    Workspace ws = workspace(c);
    try (InputStream in = c.request.getInputStream()) {
      ws.write(path, in);
    }
    c.noContent();
  }

  void stat(Call c) throws IOException {
    String path = c.pathQuery();
    FileStat s = workspace(c).stat(path);
    ObjectNode body = Json.object();
    body.put("path", s.path());
    body.put("type", s.type().name());
    body.put("size", s.size());
    body.put("permissions", s.permissions());
    body.put("modified", s.modified() == null ? null : s.modified().toString());
    c.json(200, body);
  }

  void listFiles(Call c) throws IOException {
    String path = c.pathQuery();
    ObjectNode body = Json.object();
    ArrayNode entries = body.putArray("entries");
    for (DirectoryEntry e : workspace(c).list(path)) {
      entries.addObject().put("name", e.name()).put("type", e.type().name()).put("size", e.size());
    }
    c.json(200, body);
  }

  void realpath(Call c) throws IOException {
    String path = c.pathQuery();
    c.json(200, Json.object().put("path", workspace(c).realpath(path)));
  }

  void mkdir(Call c) throws IOException {
    ApiServlet.PathRequest r = c.body(ApiServlet.PathRequest.class, null);
    workspace(c).createDirectories(Call.checkPath("path", r.path()));
    c.noContent();
  }

  void remove(Call c) throws IOException {
    ApiServlet.RemoveRequest r = c.body(ApiServlet.RemoveRequest.class, null);
    workspace(c).remove(Call.checkPath("path", r.path()), Boolean.TRUE.equals(r.recursive()));
    c.noContent();
  }

  void rename(Call c) throws IOException {
    ApiServlet.RenameRequest r = c.body(ApiServlet.RenameRequest.class, null);
    workspace(c).rename(Call.checkPath("from", r.from()), Call.checkPath("to", r.to()));
    c.noContent();
  }
}
