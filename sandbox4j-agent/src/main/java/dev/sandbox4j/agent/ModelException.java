package dev.sandbox4j.agent;

/**
 * A model provider failed (network, authentication, rate limit, server error) or answered something
 * the adapter could not read. Its message names the provider and what happened.
 */
public class ModelException extends AgentException {

  public ModelException(String message) {
    super(message);
  }

  public ModelException(String message, Throwable cause) {
    super(message, cause);
  }
}
