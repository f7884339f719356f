package dev.sandbox4j.remote;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.machine.EgressRules;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * {@link EgressRules} in the JSON of {@code /v1/sandboxes/{id}/egress} (docs/server-api.md), both
 * ways. The server validates the rules; this only carries them.
 */
final class RemoteEgress {
  private RemoteEgress() {}

  static ObjectNode json(EgressRules rules) {
    ObjectNode o = ServerClient.JSON.createObjectNode();
    o.put("mode", rules.mode().name().toLowerCase(Locale.ROOT));
    ArrayNode allow = o.putArray("allow");
    rules.allow().forEach(allow::add);
    ArrayNode headers = o.putArray("headers");
    for (EgressRules.Header h : rules.headers()) {
      ObjectNode rule =
          headers
              .addObject()
              .put("domain", h.domain())
              .put("name", h.name())
              .put("value", h.value());
      h.ports().forEach(rule.putArray("ports")::add);
    }
    o.put("interceptTls", rules.interceptTls());
    return o;
  }

  static EgressRules rules(JsonNode o) {
    String mode = ServerClient.text(o, "mode");
    if (mode == null) {
      throw new WorkspaceException("the sandbox4j server's egress rules have no mode: " + o);
    }
    List<String> allow = new ArrayList<>();
    o.path("allow").forEach(a -> allow.add(a.asText()));
    List<EgressRules.Header> headers = new ArrayList<>();
    for (JsonNode h : o.path("headers")) {
      List<Integer> ports = new ArrayList<>();
      h.path("ports").forEach(p -> ports.add(p.asInt()));
      headers.add(
          new EgressRules.Header(
              ServerClient.text(h, "domain"),
              ServerClient.text(h, "name"),
              ServerClient.text(h, "value"),
              ports));
    }
    return new EgressRules(
        EgressRules.Mode.valueOf(mode.toUpperCase(Locale.ROOT)),
        allow,
        headers,
        o.path("interceptTls").asBoolean(false));
  }
}
