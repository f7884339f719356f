package dev.sandbox4j.agent;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * A tool as the model sees it.
 *
 * @param name the name the model calls it by: letters, digits, {@code _} and {@code -}, at most 64
 * @param description what it does and when to use it
 * @param parametersSchema a JSON schema of its arguments (an object schema), as nested maps and
 *     lists
 */
public record ToolDefinition(
    String name, String description, Map<String, Object> parametersSchema) {

  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_-]{1,64}");

  public ToolDefinition {
    Objects.requireNonNull(name, "name");
    if (!NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "a tool name is 1 to 64 letters, digits, '_' or '-', was '" + name + "'");
    }
    description = description == null ? "" : description;
    // ordered as given: the model reads the properties in that order
    parametersSchema = Collections.unmodifiableMap(new LinkedHashMap<>(parametersSchema));
  }
}
