package dev.sandbox4j.agent;

/** A run reached its limit of model requests or tool calls and was stopped. */
public class UsageLimitExceededException extends AgentException {

  public UsageLimitExceededException(String message) {
    super(message);
  }
}
