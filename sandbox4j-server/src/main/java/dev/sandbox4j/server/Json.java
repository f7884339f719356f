package dev.sandbox4j.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.stream.Collectors;

/** The server's JSON: strict on input (unknown fields, trailing tokens, floats for ints). */
final class Json {

  static final ObjectMapper MAPPER =
      new ObjectMapper()
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
      throw ApiException.invalid(
          field,
          (field == null ? "bad body" : "bad value for '" + field + "'")
              + ": "
              + e.getOriginalMessage());
    } catch (JsonProcessingException e) {
      throw ApiException.invalid(null, "malformed JSON: " + e.getOriginalMessage());
    } catch (IOException e) {
      throw ApiException.invalid(null, "unreadable body: " + e.getMessage());
    }
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
