package dev.sandbox4j.agent;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The JSON schema of a record's components, and validation of a model's arguments against it.
 *
 * <p>Only the schema subset generated here is validated (types, required, enum, no unknown
 * properties), which is all a generated schema holds; the messages name the argument and the
 * problem so that the model can fix its call.
 */
final class ToolSchema {

  private static final PropertyNamingStrategies.NamingBase SNAKE =
      (PropertyNamingStrategies.NamingBase) PropertyNamingStrategies.SNAKE_CASE;

  private ToolSchema() {}

  static String jsonName(String componentName) {
    return SNAKE.translate(componentName);
  }

  static Map<String, Object> ofRecord(Class<?> type) {
    if (!type.isRecord()) {
      throw new IllegalArgumentException(type.getName() + " is not a record");
    }
    Map<String, Object> properties = new LinkedHashMap<>();
    List<String> required = new ArrayList<>();
    for (RecordComponent component : type.getRecordComponents()) {
      String name = jsonName(component.getName());
      Map<String, Object> schema = new LinkedHashMap<>(of(component.getGenericType(), type));
      Param param = component.getAnnotation(Param.class);
      if (param != null) {
        schema.put("description", param.value());
      }
      properties.put(name, schema);
      if (param == null || param.required()) {
        required.add(name);
      }
    }
    Map<String, Object> schema = new LinkedHashMap<>();
    schema.put("type", "object");
    schema.put("properties", properties);
    schema.put("required", required);
    schema.put("additionalProperties", false);
    return schema;
  }

  private static Map<String, Object> of(Type type, Class<?> owner) {
    if (type instanceof Class<?> c) {
      if (c == String.class || c == char.class || c == Character.class) {
        return ordered("type", "string");
      }
      if (c == int.class
          || c == Integer.class
          || c == long.class
          || c == Long.class
          || c == short.class
          || c == Short.class) {
        return ordered("type", "integer");
      }
      if (c == double.class || c == Double.class || c == float.class || c == Float.class) {
        return ordered("type", "number");
      }
      if (c == boolean.class || c == Boolean.class) {
        return ordered("type", "boolean");
      }
      if (c.isEnum()) {
        List<String> names = new ArrayList<>();
        for (Object constant : c.getEnumConstants()) {
          names.add(((Enum<?>) constant).name());
        }
        return ordered("type", "string", "enum", names);
      }
      if (c.isArray()) {
        return ordered("type", "array", "items", of(c.getComponentType(), owner));
      }
      if (c.isRecord()) {
        return ofRecord(c);
      }
    }
    if (type instanceof ParameterizedType p && p.getRawType() instanceof Class<?> raw) {
      if (List.class.isAssignableFrom(raw) || Set.class.isAssignableFrom(raw)) {
        return ordered("type", "array", "items", of(p.getActualTypeArguments()[0], owner));
      }
      if (Map.class.isAssignableFrom(raw) && p.getActualTypeArguments()[0] == String.class) {
        return ordered(
            "type", "object", "additionalProperties", of(p.getActualTypeArguments()[1], owner));
      }
    }
    throw new IllegalArgumentException(
        "tool arguments "
            + owner.getName()
            + ": no JSON schema for type "
            + type.getTypeName()
            + " (use strings, numbers, booleans, enums, lists, string-keyed maps or records)");
  }

  /**
   * The problems of {@code value} against {@code schema}, each naming its argument; empty if none.
   */
  static List<String> validate(JsonNode value, Map<String, Object> schema) {
    List<String> problems = new ArrayList<>();
    validate(value, schema, "", problems);
    return problems;
  }

  @SuppressWarnings("unchecked")
  private static void validate(
      JsonNode value, Map<String, Object> schema, String path, List<String> problems) {
    String where = path.isEmpty() ? "the arguments" : "`" + path + "`";
    String type = (String) schema.get("type");
    switch (type) {
      case "object" -> {
        if (!value.isObject()) {
          problems.add(where + ": expected an object, got " + describe(value));
          return;
        }
        Map<String, Object> properties =
            (Map<String, Object>) schema.getOrDefault("properties", ordered());
        List<String> required = (List<String>) schema.getOrDefault("required", List.of());
        for (String name : required) {
          JsonNode field = value.get(name);
          if (field == null || field.isNull()) {
            problems.add("`" + join(path, name) + "`: required, missing");
          }
        }
        Object additional = schema.get("additionalProperties");
        for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> field = it.next();
          String name = field.getKey();
          Map<String, Object> propertySchema = (Map<String, Object>) properties.get(name);
          if (propertySchema == null && additional instanceof Map<?, ?> valueSchema) {
            propertySchema = (Map<String, Object>) valueSchema;
          }
          if (propertySchema == null) {
            problems.add(
                "`"
                    + join(path, name)
                    + "`: unknown argument (known: "
                    + String.join(", ", properties.keySet())
                    + ")");
          } else if (!field.getValue().isNull()) {
            validate(field.getValue(), propertySchema, join(path, name), problems);
          }
        }
      }
      case "array" -> {
        if (!value.isArray()) {
          problems.add(where + ": expected an array, got " + describe(value));
          return;
        }
        Map<String, Object> items = (Map<String, Object>) schema.get("items");
        for (int i = 0; i < value.size(); i++) {
          validate(value.get(i), items, path + "[" + i + "]", problems);
        }
      }
      case "string" -> {
        if (!value.isTextual()) {
          problems.add(where + ": expected a string, got " + describe(value));
        } else if (schema.get("enum") instanceof List<?> allowed
            && !allowed.contains(value.asText())) {
          problems.add(where + ": expected one of " + allowed + ", got " + describe(value));
        }
      }
      case "integer" -> {
        if (!value.isIntegralNumber() && !(value.isNumber() && value.asDouble() % 1 == 0)) {
          problems.add(where + ": expected an integer, got " + describe(value));
        }
      }
      case "number" -> {
        if (!value.isNumber()) {
          problems.add(where + ": expected a number, got " + describe(value));
        }
      }
      case "boolean" -> {
        if (!value.isBoolean()) {
          problems.add(where + ": expected true or false, got " + describe(value));
        }
      }
      default -> throw new IllegalStateException("schema type " + type);
    }
  }

  /** A map keeping the order given: the model reads the schema in that order. */
  private static Map<String, Object> ordered(Object... keysAndValues) {
    Map<String, Object> map = new LinkedHashMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      map.put((String) keysAndValues[i], keysAndValues[i + 1]);
    }
    return java.util.Collections.unmodifiableMap(map);
  }

  private static String join(String path, String name) {
    return path.isEmpty() ? name : path + "." + name;
  }

  private static String describe(JsonNode value) {
    String kind =
        switch (value.getNodeType()) {
          case STRING -> "a string";
          case NUMBER -> "a number";
          case BOOLEAN -> "a boolean";
          case ARRAY -> "an array";
          case OBJECT -> "an object";
          case NULL -> "null";
          default -> value.getNodeType().toString().toLowerCase(java.util.Locale.ROOT);
        };
    String text = value.toString();
    return kind + " (" + (text.length() > 40 ? text.substring(0, 40) + "…" : text) + ")";
  }
}
