package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.io.IOException;
import java.util.Set;

/**
 * The routes of what sandboxes start from: an organization's snapshots (save, list, delete) and the
 * published images, and the {@code Snapshot} object they answer with.
 */
final class SnapshotRoutes {

  private final Sandboxes sandboxes;

  SnapshotRoutes(Sandboxes sandboxes) {
    this.sandboxes = sandboxes;
  }

  void snapshot(Call c) throws IOException {
    ApiServlet.SnapshotRequest request = c.body(ApiServlet.SnapshotRequest.class, null);
    c.json(201, snapshot(sandboxes.snapshot(c.organization, c.param("id"), request.name())));
  }

  void snapshots(Call c) throws IOException {
    c.onlyQuery(Set.of());
    ObjectNode body = Json.object();
    ArrayNode items = body.putArray("items");
    sandboxes.snapshots(c.organization).forEach(s -> items.add(snapshot(s)));
    c.json(200, body);
  }

  void images(Call c) throws IOException {
    c.onlyQuery(Set.of());
    ObjectNode body = Json.object();
    ArrayNode items = body.putArray("items");
    for (ImageInfo i : sandboxes.images()) {
      items
          .addObject()
          .put("name", i.name())
          .put("created", i.created().toString())
          .put("sizeBytes", i.sizeBytes())
          .put("description", i.description());
    }
    c.json(200, body);
  }

  void deleteSnapshot(Call c) {
    sandboxes.deleteSnapshot(c.organization, c.param("name"));
    c.noContent();
  }

  static JsonNode snapshot(Sandboxes.Snapshot s) {
    SnapshotInfo info = s.info();
    ObjectNode o = Json.object();
    o.put("name", s.row().name());
    o.put("created", info.created().toString());
    o.put("source", s.row().source());
    o.put("image", Sandboxes.shownImage(s.row().organization(), info.image()));
    o.put("cpus", info.cpus());
    o.put("memoryBytes", info.memoryBytes());
    o.put("pids", info.pids());
    o.put("sizeBytes", info.sizeBytes());
    return o;
  }
}
