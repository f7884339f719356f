package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.context.Context;
import java.util.List;
import java.util.Optional;

/**
 * The spans of a run, named and attributed after the OpenTelemetry GenAI semantic conventions
 * ({@code invoke_agent}, {@code chat MODEL}, {@code execute_tool NAME}). Records names, ids, token
 * counts and finish reasons; never a prompt, message, tool argument or result.
 */
final class RunTelemetry {

  static final AttributeKey<String> OPERATION = AttributeKey.stringKey("gen_ai.operation.name");
  static final AttributeKey<String> PROVIDER = AttributeKey.stringKey("gen_ai.provider.name");
  // the attribute the conventions had before gen_ai.provider.name; back ends still read it
  static final AttributeKey<String> SYSTEM = AttributeKey.stringKey("gen_ai.system");
  static final AttributeKey<String> REQUEST_MODEL = AttributeKey.stringKey("gen_ai.request.model");
  static final AttributeKey<String> RESPONSE_MODEL =
      AttributeKey.stringKey("gen_ai.response.model");
  static final AttributeKey<Long> INPUT_TOKENS = AttributeKey.longKey("gen_ai.usage.input_tokens");
  static final AttributeKey<Long> OUTPUT_TOKENS =
      AttributeKey.longKey("gen_ai.usage.output_tokens");
  static final AttributeKey<List<String>> FINISH_REASONS =
      AttributeKey.stringArrayKey("gen_ai.response.finish_reasons");
  static final AttributeKey<String> TOOL_NAME = AttributeKey.stringKey("gen_ai.tool.name");
  static final AttributeKey<String> TOOL_CALL_ID = AttributeKey.stringKey("gen_ai.tool.call.id");
  static final AttributeKey<String> TOOL_TYPE = AttributeKey.stringKey("gen_ai.tool.type");

  private static final List<String> TOOL_CALLS = List.of("tool_calls");
  private static final List<String> STOP = List.of("stop");

  private final SandboxTelemetry telemetry;

  RunTelemetry(SandboxTelemetry telemetry) {
    this.telemetry = telemetry;
  }

  Span startRun(Context parent, String modelName) {
    Span span = telemetry.tracer().spanBuilder("invoke_agent").setParent(parent).startSpan();
    if (span.isRecording()) {
      span.setAttribute(OPERATION, "invoke_agent");
      setModel(span, modelName);
    }
    return span;
  }

  void endRun(Span span, Optional<WorkspaceRef> workspace, Usage usage) {
    if (span.isRecording()) {
      setWorkspace(span, workspace);
      span.setAttribute(INPUT_TOKENS, usage.inputTokens());
      span.setAttribute(OUTPUT_TOKENS, usage.outputTokens());
    }
    span.end();
  }

  Span startChat(String modelName) {
    Span span = telemetry.tracer().spanBuilder("chat").setSpanKind(SpanKind.CLIENT).startSpan();
    if (span.isRecording()) {
      span.updateName("chat " + model(modelName));
      span.setAttribute(OPERATION, "chat");
      setModel(span, modelName);
    }
    return span;
  }

  /**
   * The response's model, tokens and finish reason: {@code tool_calls} when it asks for tools,
   * {@code stop} otherwise (what {@link ResponseMessage} tells; the provider's own reason is not
   * kept in it).
   */
  static void responded(Span span, ResponseMessage response) {
    if (!span.isRecording()) {
      return;
    }
    if (!response.modelName().isEmpty()) {
      span.setAttribute(RESPONSE_MODEL, model(response.modelName()));
    }
    span.setAttribute(INPUT_TOKENS, response.usage().inputTokens());
    span.setAttribute(OUTPUT_TOKENS, response.usage().outputTokens());
    span.setAttribute(FINISH_REASONS, response.toolCalls().isEmpty() ? STOP : TOOL_CALLS);
  }

  Span startTool(ResponsePart.ToolCall call) {
    // a constant name first: with no SDK nothing is concatenated
    Span span = telemetry.tracer().spanBuilder("execute_tool").startSpan();
    if (span.isRecording()) {
      span.updateName("execute_tool " + call.toolName());
      span.setAttribute(OPERATION, "execute_tool");
      span.setAttribute(TOOL_NAME, call.toolName());
      span.setAttribute(TOOL_CALL_ID, call.id());
      span.setAttribute(TOOL_TYPE, "function");
    }
    return span;
  }

  void endTool(Span span, Optional<WorkspaceRef> workspace) {
    if (span.isRecording()) {
      setWorkspace(span, workspace);
    }
    span.end();
  }

  private static void setWorkspace(Span span, Optional<WorkspaceRef> workspace) {
    workspace.ifPresent(
        ref -> {
          span.setAttribute(SandboxTelemetry.WORKSPACE_PROVIDER, ref.provider());
          span.setAttribute(SandboxTelemetry.WORKSPACE_ID, ref.id());
        });
  }

  /** {@code anthropic:claude-x} is provider {@code anthropic}, model {@code claude-x}. */
  private static void setModel(Span span, String modelName) {
    int colon = modelName.indexOf(':');
    String provider = colon > 0 ? modelName.substring(0, colon) : modelName;
    span.setAttribute(PROVIDER, provider);
    span.setAttribute(SYSTEM, provider);
    span.setAttribute(REQUEST_MODEL, model(modelName));
  }

  private static String model(String modelName) {
    int colon = modelName.indexOf(':');
    return colon > 0 ? modelName.substring(colon + 1) : modelName;
  }
}
