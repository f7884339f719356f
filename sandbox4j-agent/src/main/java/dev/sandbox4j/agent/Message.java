package dev.sandbox4j.agent;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;

/**
 * One entry of a conversation with a model: what the agent sent ({@link RequestMessage}) or what
 * the model answered ({@link ResponseMessage}).
 *
 * <p>Messages are model-agnostic values: any {@link Model} reads them, {@link Messages} turns a
 * history into JSON and back, and a history passed to a later run continues it — in the same
 * workspace, since every response records the workspace ref in force when it was made.
 */
@JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
@JsonSubTypes({
  @JsonSubTypes.Type(value = RequestMessage.class, name = "request"),
  @JsonSubTypes.Type(value = ResponseMessage.class, name = "response")
})
public sealed interface Message permits RequestMessage, ResponseMessage {}
