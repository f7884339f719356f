package dev.sandbox4j.server;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamReadException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
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
      throw ApiException.invalid(
          field,
          (field == null ? "bad body" : "bad value for '" + field + "'")
              + ": "
              + e.getOriginalMessage());
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

  private static String fieldOf(JsonMappingException e) {
    String path =
        e.getPath().stream()
            .map(r -> r.getFieldName() != null ? r.getFieldName() : "[" + r.getIndex() + "]")
            .collect(Collectors.joining("."))
            .replace(".[", "[");
    return path.isEmpty() ? null : path;
  }
}
