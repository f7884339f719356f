package dev.sandbox4j.agent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.agent.models.TestModel;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ToolSchemaTest {

  enum Mode {
    FAST,
    SLOW
  }

  record Inner(@Param("a name") String name) {}

  record Args(
      @Param("the path") String path,
      @Param(value = "how many", required = false) Integer count,
      boolean flag,
      Mode mode,
      List<String> tags,
      Map<String, String> env,
      Inner inner,
      double ratio) {}

  record Unsupported(Object anything) {}

  @Test
  @SuppressWarnings("unchecked")
  void recordComponentsBecomeASnakeCaseObjectSchema() throws Exception {
    Tool tool = Tool.of("t", "d", Args.class, (ctx, args) -> "");
    Map<String, Object> schema = tool.definition().parametersSchema();
    String json = new ObjectMapper().writeValueAsString(schema);
    assertThat(json)
        .contains("\"path\":{\"type\":\"string\",\"description\":\"the path\"}")
        .contains("\"count\":{\"type\":\"integer\",\"description\":\"how many\"}")
        .contains("\"mode\":{\"type\":\"string\",\"enum\":[\"FAST\",\"SLOW\"]}")
        .contains("\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}")
        .contains("\"additionalProperties\":false");
    assertThat((List<Object>) schema.get("required"))
        .containsExactly("path", "flag", "mode", "tags", "env", "inner", "ratio");
  }

  @Test
  void validArgumentsBindAndOptionalOnesMayBeLeftOut() {
    @SuppressWarnings("unchecked")
    RecordTool<Args> tool = (RecordTool<Args>) Tool.of("t", "d", Args.class, (ctx, args) -> "");
    Args args =
        tool.parse(
            "{\"path\":\"p\",\"flag\":true,\"mode\":\"SLOW\",\"tags\":[\"x\"],"
                + "\"env\":{\"K\":\"V\"},\"inner\":{\"name\":\"n\"},\"ratio\":0.5}");
    assertThat(args)
        .isEqualTo(
            new Args(
                "p", null, true, Mode.SLOW, List.of("x"), Map.of("K", "V"), new Inner("n"), 0.5));
  }

  @Test
  void eachProblemIsNamed() {
    @SuppressWarnings("unchecked")
    RecordTool<Args> tool = (RecordTool<Args>) Tool.of("t", "d", Args.class, (ctx, args) -> "");
    assertThatThrownBy(
            () ->
                tool.parse(
                    "{\"path\":\"p\",\"count\":\"3\",\"flag\":1,\"mode\":\"MEDIUM\",\"tags\":[1],"
                        + "\"env\":{\"K\":2},\"inner\":{},\"ratio\":\"x\"}"))
        .isInstanceOf(ModelRetryException.class)
        .hasMessageContaining("`count`: expected an integer, got a string (\"3\")")
        .hasMessageContaining("`flag`: expected true or false, got a number (1)")
        .hasMessageContaining("`mode`: expected one of [FAST, SLOW], got a string (\"MEDIUM\")")
        .hasMessageContaining("`tags[0]`: expected a string")
        .hasMessageContaining("`env.K`: expected a string")
        .hasMessageContaining("`inner.name`: required, missing")
        .hasMessageContaining("`ratio`: expected a number");
    assertThatThrownBy(() -> tool.parse("not json"))
        .isInstanceOf(ModelRetryException.class)
        .hasMessageContaining("are not valid JSON");
  }

  @Test
  void typesWithoutASchemaAreRefusedWhenTheToolIsBuilt() {
    assertThatThrownBy(() -> Tool.of("t", "d", Unsupported.class, (ctx, args) -> ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no JSON schema for type java.lang.Object");
  }

  @Test
  void theTestModelCallsEveryToolWithSchemaValidArgumentsThenReportsTheResults() {
    List<String> calls = new java.util.concurrent.CopyOnWriteArrayList<>();
    Tool a =
        Tool.of(
            "a",
            "d",
            Args.class,
            (ctx, args) -> {
              calls.add("a " + args.mode());
              return "A";
            });
    Tool b =
        Tool.of(
            "b",
            "d",
            Inner.class,
            (ctx, args) -> {
              calls.add("b " + args.name());
              return "B";
            });
    RunResult result = Agent.builder().model(new TestModel()).tool(a).tool(b).build().runSync("x");
    assertThat(calls).containsExactlyInAnyOrder("a FAST", "b a");
    assertThat(result.output()).isIn("{\"a\":\"A\",\"b\":\"B\"}", "{\"b\":\"B\",\"a\":\"A\"}");
  }
}
