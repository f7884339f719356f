package dev.sandbox4j.agent;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MapperFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.util.List;
import java.util.Map;

/** A {@link Tool} whose arguments are a record, validated against the record's schema. */
final class RecordTool<A extends Record> implements Tool {

  private static final ObjectMapper ARGUMENTS =
      JsonMapper.builder()
          .propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .disable(MapperFeature.ALLOW_COERCION_OF_SCALARS)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .build();

  private final ToolDefinition definition;
  private final Class<A> type;
  private final Function<A> function;

  RecordTool(String name, String description, Class<A> type, Function<A> function) {
    this.definition = new ToolDefinition(name, description, ToolSchema.ofRecord(type));
    this.type = type;
    this.function = function;
  }

  @Override
  public ToolDefinition definition() {
    return definition;
  }

  @Override
  public String call(ToolContext context, String arguments) throws Exception {
    return function.apply(context, parse(arguments));
  }

  A parse(String arguments) {
    JsonNode node;
    try {
      node = ARGUMENTS.readTree(arguments);
    } catch (JsonProcessingException e) {
      throw new ModelRetryException(
          "The arguments of `"
              + definition.name()
              + "` are not valid JSON ("
              + e.getOriginalMessage()
              + "). Call it again with a JSON object that matches its schema.");
    }
    Map<String, Object> schema = definition.parametersSchema();
    List<String> problems = ToolSchema.validate(node, schema);
    if (!problems.isEmpty()) {
      throw new ModelRetryException(
          "Invalid arguments for `"
              + definition.name()
              + "`:\n- "
              + String.join("\n- ", problems)
              + "\nCall it again with arguments that match its schema.");
    }
    try {
      return ARGUMENTS.treeToValue(node, type);
    } catch (JsonProcessingException e) {
      throw new ModelRetryException(
          "Invalid arguments for `" + definition.name() + "`: " + e.getOriginalMessage());
    }
  }
}
