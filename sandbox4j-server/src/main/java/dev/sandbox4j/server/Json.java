package dev.sandbox4j.server;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamReadException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.stream.Collectors;

/**
 * The server's JSON: strict on input (unknown fields, duplicate keys, trailing tokens, floats for
 * ints). A duplicate key is refused, never "the last one wins": two parsers of one body (a proxy,
 * an audit log, this server) must not disagree about what it says.
 */
final class Json {

  static final ObjectMapper MAPPER =
      new ObjectMapper(
              JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build())
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
          .disable(DeserializationFeature.ACCEPT_FLOAT_AS_INT)
          .disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);

  private Json() {}

  static ObjectNode object() {
    return MAPPER.createObjectNode();
  }

  /** Parses {@code bytes} as a {@code type}, or an {@code invalid_request} naming the field. */
  static <T> T parse(byte[] bytes, Class<T> type) {
    if (bytes.length == 0) {
      throw ApiException.invalid(null, "the request needs a JSON body");
    }
    try {
      T value = MAPPER.readValue(bytes, type);
      if (value == null) {
        throw ApiException.invalid(null, "the body must be a JSON object, was null");
      }
      return value;
    } catch (UnrecognizedPropertyException e) {
      throw ApiException.invalid(
          fieldOf(e), "unknown field '" + Sandboxes.printable(e.getPropertyName()) + "'");
    } catch (JsonMappingException e) {
      String field = fieldOf(e);
      if (e.getCause() instanceof StreamReadException cause && duplicate(cause) != null) {
        // inside a map or list: the field that holds it
        throw ApiException.invalid(
            field,
            "duplicate key '"
                + Sandboxes.printable(duplicate(cause))
                + "'"
                + (field == null ? "" : " in '" + field + "'")
                + ": give each key once");
      }
      throw ApiException.invalid(field, badValue(field, e, bytes));
    } catch (StreamReadException e) {
      throw malformed(e);
    } catch (JsonProcessingException e) {
      throw ApiException.invalid(null, "malformed JSON: " + e.getOriginalMessage());
    } catch (IOException e) {
      throw ApiException.invalid(null, "unreadable body: " + e.getMessage());
    }
  }

  /**
   * The error for JSON that does not parse; a duplicate key names its field (the parser stands on
   * the second occurrence).
   */
  static ApiException malformed(StreamReadException e) {
    String name = duplicate(e);
    if (name != null) {
      return ApiException.invalid(
          Sandboxes.printable(name),
          "duplicate key '" + Sandboxes.printable(name) + "': give each key once");
    }
    return ApiException.invalid(null, "malformed JSON: " + e.getOriginalMessage());
  }

  /** The key that {@code e} found twice (the parser stands on its second occurrence), or null. */
  private static String duplicate(StreamReadException e) {
    String message = e.getOriginalMessage();
    if (message != null
        && message.startsWith("Duplicate field")
        && e.getProcessor() instanceof JsonParser p) {
      return p.getParsingContext().getCurrentName();
    }
    return null;
  }

  /**
   * What was wrong with {@code field}'s value (the body's, if null), in JSON's words: Jackson's own
   * messages name Java types and this server's classes, which a client cannot act on and should not
   * see.
   */
  private static String badValue(String field, JsonMappingException e, byte[] body) {
    String what = field == null ? "the body" : "'" + field + "'";
    if (e.getCause() instanceof IllegalArgumentException invalid && invalid.getMessage() != null) {
      return "bad value for " + what + ": " + Sandboxes.printable(invalid.getMessage());
    }
    String original = e.getOriginalMessage();
    if (original != null && original.startsWith("Trailing token")) {
      return "the body must be one JSON value, but more follows it";
    }
    if (e instanceof MismatchedInputException m && m.getTargetType() != null) {
      String was = kindAt(body, e);
      return what + " must be " + expected(m.getTargetType()) + (was == null ? "" : ", was " + was);
    }
    return "bad value for " + what;
  }

  /** The JSON kind of the value {@code e} stands on, read from the body as a tree. */
  private static String kindAt(byte[] body, JsonMappingException e) {
    StringBuilder pointer = new StringBuilder();
    for (JsonMappingException.Reference r : e.getPath()) {
      pointer.append('/');
      if (r.getFieldName() != null) {
        pointer.append(r.getFieldName().replace("~", "~0").replace("/", "~1"));
      } else if (r.getIndex() >= 0) {
        pointer.append(r.getIndex());
      } else {
        return null;
      }
    }
    JsonNode node;
    try {
      node = MAPPER.readTree(body).at(pointer.toString());
    } catch (IOException | IllegalArgumentException unreadable) {
      return null;
    }
    return switch (node.getNodeType()) {
      case OBJECT, POJO -> "an object";
      case ARRAY -> "an array";
      case STRING, BINARY -> "a string";
      case NUMBER -> node.isIntegralNumber() ? "an integer" : "a fractional number";
      case BOOLEAN -> "a boolean";
      case NULL -> "null";
      case MISSING -> null;
    };
  }

  private static String expected(Class<?> type) {
    if (type == String.class || type == char.class || type == Character.class || type.isEnum()) {
      return "a string";
    }
    if (type == int.class
        || type == Integer.class
        || type == long.class
        || type == Long.class
        || type == short.class
        || type == Short.class) {
      return "an integer";
    }
    if (Number.class.isAssignableFrom(type) || type == double.class || type == float.class) {
      return "a number";
    }
    if (type == boolean.class || type == Boolean.class) {
      return "true or false";
    }
    if (type == byte[].class) {
      return "a base64 string"; // how Jackson reads bytes
    }
    if (type.isArray() || java.util.Collection.class.isAssignableFrom(type)) {
      return "an array";
    }
    return "an object";
  }

  private static String fieldOf(JsonMappingException e) {
    String path =
        e.getPath().stream()
            .map(r -> r.getFieldName() != null ? r.getFieldName() : "[" + r.getIndex() + "]")
            .collect(Collectors.joining("."))
            .replace(".[", "[");
    return path.isEmpty() ? null : path;
  }
}
