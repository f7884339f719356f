package dev.sandbox4j.server;

import java.util.List;
import java.util.Map;

/**
 * One route of the API: a method and a path template such as {@code /v1/sandboxes/{id}/exec}; the
 * OpenAPI document lists exactly these (a test checks it).
 */
record Route(String method, String template, boolean authenticated, Handler handler) {

  /** Handles a matched call. */
  @FunctionalInterface
  interface Handler {
    void handle(Call call) throws Exception;
  }

  List<String> segments() {
    return List.of(template.substring(1).split("/"));
  }

  /** The template's parameters bound to {@code path}'s segments, or null if it does not match. */
  Map<String, String> match(List<String> path) {
    List<String> parts = segments();
    if (parts.size() != path.size()) {
      return null;
    }
    Map<String, String> params = new java.util.LinkedHashMap<>();
    for (int i = 0; i < parts.size(); i++) {
      String p = parts.get(i);
      if (p.startsWith("{") && p.endsWith("}")) {
        if (path.get(i).isEmpty()) {
          return null;
        }
        params.put(p.substring(1, p.length() - 1), path.get(i));
      } else if (!p.equals(path.get(i))) {
        return null;
      }
    }
    return params;
  }
}
