package dev.sandbox4j.agent;

/** The root of the agent's own failures; workspace failures stay {@code WorkspaceException}s. */
public class AgentException extends RuntimeException {

  public AgentException(String message) {
    super(message);
  }

  public AgentException(String message, Throwable cause) {
    super(message, cause);
  }
}
