package dev.sandbox4j.agent;

import com.fasterxml.jackson.annotation.JsonIgnore;
import com.fasterxml.jackson.annotation.JsonInclude;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * What the model answered in one turn: text and/or tool calls.
 *
 * @param parts text and tool calls, in the model's order
 * @param usage what this one response cost
 * @param modelName the model that made it, as the provider named it
 * @param workspace the workspace the run used when this response was made (or, when the run created
 *     one while carrying out this response's tool calls, that one); {@code null} when there was
 *     none yet. A later run given this history continues in it.
 * @param timestamp when the agent received it
 */
public record ResponseMessage(
    List<ResponsePart> parts,
    Usage usage,
    String modelName,
    @JsonInclude(JsonInclude.Include.NON_NULL) WorkspaceRef workspace,
    Instant timestamp)
    implements Message {

  public ResponseMessage {
    parts = List.copyOf(parts);
    usage = usage == null ? Usage.NONE : usage;
    modelName = modelName == null ? "" : modelName;
    Objects.requireNonNull(timestamp, "timestamp");
  }

  /** A response of the given parts, with no usage recorded: for function and test models. */
  public static ResponseMessage of(List<ResponsePart> parts) {
    return new ResponseMessage(parts, Usage.NONE, "", null, Instant.now());
  }

  /** A response that is only text. */
  public static ResponseMessage text(String text) {
    return of(List.of(new ResponsePart.Text(text)));
  }

  /** A response that calls one tool with arguments given as a JSON object. */
  public static ResponseMessage toolCall(String id, String toolName, String argumentsJson) {
    return of(List.of(new ResponsePart.ToolCall(id, toolName, argumentsJson)));
  }

  /** The tool calls, in order. */
  @JsonIgnore
  public List<ResponsePart.ToolCall> toolCalls() {
    List<ResponsePart.ToolCall> calls = new ArrayList<>();
    for (ResponsePart part : parts) {
      if (part instanceof ResponsePart.ToolCall call) {
        calls.add(call);
      }
    }
    return calls;
  }

  /** All text parts joined, or an empty string. */
  @JsonIgnore
  public String text() {
    return parts.stream()
        .filter(ResponsePart.Text.class::isInstance)
        .map(part -> ((ResponsePart.Text) part).text())
        .collect(Collectors.joining());
  }

  /** The workspace ref, if one was in force. */
  public Optional<WorkspaceRef> workspaceRef() {
    return Optional.ofNullable(workspace);
  }

  /** This response with its workspace ref replaced; {@code null} removes it. */
  public ResponseMessage withWorkspace(WorkspaceRef ref) {
    return new ResponseMessage(parts, usage, modelName, ref, timestamp);
  }

  /** This response with usage and model name set, as a model adapter reports them. */
  public ResponseMessage withUsage(Usage newUsage, String newModelName) {
    return new ResponseMessage(parts, newUsage, newModelName, workspace, timestamp);
  }
}
