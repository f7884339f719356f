package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Message;
import java.time.Instant;
import java.util.Base64;
import java.util.List;
import java.util.Map;

/**
 * Protobuf messages to and from their canonical JSON (protobuf.dev's "ProtoJSON"), for the types
 * envd's messages use: scalars (64-bit integers as strings), bytes as base64, enums by name, nested
 * messages, repeated fields, {@code map<string, string>} and {@code google.protobuf.Timestamp} (RFC
 * 3339). Written here rather than taken from protobuf-java-util, which would bring Gson and Guava
 * into the server for these few types.
 */
final class E2bProtoJson {

  private static final String TIMESTAMP = "google.protobuf.Timestamp";

  private E2bProtoJson() {}

  static ObjectNode toJson(Message m) {
    ObjectNode o = Json.object();
    for (Map.Entry<FieldDescriptor, Object> e : m.getAllFields().entrySet()) {
      FieldDescriptor f = e.getKey();
      if (f.isMapField()) {
        ObjectNode map = o.putObject(f.getJsonName());
        for (Object entry : (List<?>) e.getValue()) {
          Message kv = (Message) entry;
          Descriptor d = kv.getDescriptorForType();
          map.set(
              String.valueOf(kv.getField(d.findFieldByName("key"))),
              value(d.findFieldByName("value"), kv.getField(d.findFieldByName("value"))));
        }
      } else if (f.isRepeated()) {
        ArrayNode list = o.putArray(f.getJsonName());
        for (Object v : (List<?>) e.getValue()) {
          list.add(value(f, v));
        }
      } else {
        o.set(f.getJsonName(), value(f, e.getValue()));
      }
    }
    return o;
  }

  private static JsonNode value(FieldDescriptor f, Object v) {
    return switch (f.getJavaType()) {
      case INT -> unsigned32(f, (Integer) v);
      case LONG -> Json.MAPPER.getNodeFactory().textNode(unsigned64(f, (Long) v));
      case FLOAT -> Json.MAPPER.getNodeFactory().numberNode((Float) v);
      case DOUBLE -> Json.MAPPER.getNodeFactory().numberNode((Double) v);
      case BOOLEAN -> Json.MAPPER.getNodeFactory().booleanNode((Boolean) v);
      case STRING -> Json.MAPPER.getNodeFactory().textNode((String) v);
      case BYTE_STRING ->
          Json.MAPPER
              .getNodeFactory()
              .textNode(Base64.getEncoder().encodeToString(((ByteString) v).toByteArray()));
      case ENUM -> Json.MAPPER.getNodeFactory().textNode(((EnumValueDescriptor) v).getName());
      case MESSAGE -> {
        Message m = (Message) v;
        if (m.getDescriptorForType().getFullName().equals(TIMESTAMP)) {
          Descriptor d = m.getDescriptorForType();
          long seconds = (Long) m.getField(d.findFieldByName("seconds"));
          int nanos = (Integer) m.getField(d.findFieldByName("nanos"));
          yield Json.MAPPER
              .getNodeFactory()
              .textNode(Instant.ofEpochSecond(seconds, nanos).toString());
        }
        yield toJson(m);
      }
    };
  }

  private static JsonNode unsigned32(FieldDescriptor f, int v) {
    boolean unsigned =
        f.getType() == FieldDescriptor.Type.UINT32 || f.getType() == FieldDescriptor.Type.FIXED32;
    return Json.MAPPER.getNodeFactory().numberNode(unsigned ? Integer.toUnsignedLong(v) : v);
  }

  private static String unsigned64(FieldDescriptor f, long v) {
    boolean unsigned =
        f.getType() == FieldDescriptor.Type.UINT64 || f.getType() == FieldDescriptor.Type.FIXED64;
    return unsigned ? Long.toUnsignedString(v) : Long.toString(v);
  }

  /**
   * The message of type {@code type} that {@code json} describes; fields this type lacks are
   * ignored (Connect's JSON is read leniently, as clients may be newer).
   *
   * @throws IllegalArgumentException if a value has the wrong shape for its field
   */
  static DynamicMessage fromJson(JsonNode json, Descriptor type) {
    DynamicMessage.Builder b = DynamicMessage.newBuilder(type);
    if (json == null || json.isNull()) {
      return b.build();
    }
    if (!json.isObject()) {
      throw new IllegalArgumentException(type.getFullName() + " must be a JSON object");
    }
    for (Map.Entry<String, JsonNode> e : json.properties()) {
      FieldDescriptor f = field(type, e.getKey());
      if (f == null || e.getValue().isNull()) {
        continue;
      }
      if (f.isMapField()) {
        Descriptor entry = f.getMessageType();
        for (Map.Entry<String, JsonNode> kv : e.getValue().properties()) {
          DynamicMessage.Builder eb = DynamicMessage.newBuilder(entry);
          eb.setField(entry.findFieldByName("key"), kv.getKey());
          eb.setField(
              entry.findFieldByName("value"), parse(entry.findFieldByName("value"), kv.getValue()));
          b.addRepeatedField(f, eb.build());
        }
      } else if (f.isRepeated()) {
        for (JsonNode item : e.getValue()) {
          b.addRepeatedField(f, parse(f, item));
        }
      } else {
        b.setField(f, parse(f, e.getValue()));
      }
    }
    return b.build();
  }

  private static FieldDescriptor field(Descriptor type, String name) {
    for (FieldDescriptor f : type.getFields()) {
      if (f.getJsonName().equals(name) || f.getName().equals(name)) {
        return f;
      }
    }
    return null;
  }

  private static Object parse(FieldDescriptor f, JsonNode v) {
    String where = f.getFullName();
    try {
      return switch (f.getJavaType()) {
        case INT -> (int) Long.parseLong(v.asText());
        case LONG ->
            f.getType() == FieldDescriptor.Type.UINT64
                    || f.getType() == FieldDescriptor.Type.FIXED64
                ? Long.parseUnsignedLong(v.asText())
                : Long.parseLong(v.asText());
        case FLOAT -> (float) v.asDouble();
        case DOUBLE -> v.asDouble();
        case BOOLEAN -> v.asBoolean();
        case STRING -> v.asText();
        case BYTE_STRING -> ByteString.copyFrom(Base64.getDecoder().decode(v.asText()));
        case ENUM -> {
          EnumValueDescriptor e =
              v.isNumber()
                  ? f.getEnumType().findValueByNumber(v.asInt())
                  : f.getEnumType().findValueByName(v.asText());
          if (e == null) {
            throw new IllegalArgumentException("unknown value " + v);
          }
          yield e;
        }
        case MESSAGE -> {
          if (f.getMessageType().getFullName().equals(TIMESTAMP)) {
            Instant t = Instant.parse(v.asText());
            Descriptor d = f.getMessageType();
            yield DynamicMessage.newBuilder(d)
                .setField(d.findFieldByName("seconds"), t.getEpochSecond())
                .setField(d.findFieldByName("nanos"), t.getNano())
                .build();
          }
          yield fromJson(v, f.getMessageType());
        }
      };
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          where + ": " + e.getMessage() + " (value " + Sandboxes.printable(v.toString()) + ")", e);
    }
  }
}
