package dev.sandbox4j.agent;

/**
 * The model kept doing something the agent cannot act on, such as calling a tool with invalid
 * arguments more times than the tool allows retries.
 */
public class UnexpectedModelBehaviorException extends AgentException {

  public UnexpectedModelBehaviorException(String message) {
    super(message);
  }
}
