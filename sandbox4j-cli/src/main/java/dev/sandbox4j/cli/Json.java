package dev.sandbox4j.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.LinkedHashMap;
import java.util.Map;

/** {@code --json} output, one compact JSON value per line. */
final class Json {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private Json() {}

  /** {@code {"provider": ..., "id": ...}}, the start of every object about one sandbox. */
  static Map<String, Object> ref(WorkspaceRef ref) {
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("provider", ref.provider());
    fields.put("id", ref.id());
    return fields;
  }

  /** {@code value} (maps keep their order, records map by component) as compact JSON. */
  static String write(Object value) {
    try {
      return MAPPER.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot write JSON for " + value, e);
    }
  }
}
