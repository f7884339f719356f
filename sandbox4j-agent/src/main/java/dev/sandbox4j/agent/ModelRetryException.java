package dev.sandbox4j.agent;

/**
 * Thrown by a tool to ask the model to call it again differently; the message goes back to the
 * model as a retry prompt, so it should say what to change. Each tool allows a bounded number of
 * retries in a row ({@link Tool#maxRetries()}).
 */
public class ModelRetryException extends AgentException {

  public ModelRetryException(String message) {
    super(message);
  }
}
