package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Instant;
import java.util.function.Consumer;

/**
 * One JSON line per request: time, method, route template (never the raw path, which could carry
 * anything), organization, sandbox id, status, duration. Never a key: nothing from headers is
 * logged.
 */
final class RequestLog {

  private final Consumer<String> sink;

  RequestLog(Consumer<String> sink) {
    this.sink = sink;
  }

  void request(
      String method, String route, String organization, String sandbox, int status, long ms) {
    ObjectNode line = Json.object();
    line.put("time", Instant.now().toString());
    line.put("method", method);
    line.put("route", route);
    line.put("org", organization);
    line.put(
        "sandbox", sandbox != null && Sandboxes.ID.matcher(sandbox).matches() ? sandbox : null);
    line.put("status", status);
    line.put("durationMs", ms);
    try {
      sink.accept(Json.MAPPER.writeValueAsString(line));
    } catch (com.fasterxml.jackson.core.JsonProcessingException | RuntimeException e) {
      // a failing log sink must not fail the request it describes
    }
  }
}
