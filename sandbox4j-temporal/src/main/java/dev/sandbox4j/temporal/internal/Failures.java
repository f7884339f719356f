package dev.sandbox4j.temporal.internal;

import dev.sandbox4j.agent.AgentException;
import dev.sandbox4j.agent.ModelException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceReadOnlyException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.temporal.failure.ApplicationFailure;
import java.util.List;

/**
 * Which exceptions leave an activity as non-retryable failures. The workspace's own: a timeout
 * already spent its deadline, an output limit would be hit again, a machine that is gone stays
 * gone, a read-only workspace stays read-only. The agent's: misconfiguration and limits (a model's
 * transient {@link ModelException} is retried).
 */
public final class Failures {

  private static final List<Class<? extends RuntimeException>> WORKSPACE =
      List.of(
          WorkspaceTimeoutException.class,
          WorkspaceOutputLimitException.class,
          WorkspaceUnavailableException.class,
          WorkspaceReadOnlyException.class);

  /** The type names of {@link #WORKSPACE}, for a retry policy's do-not-retry list. */
  public static final String[] NON_RETRYABLE =
      WORKSPACE.stream().map(Class::getName).toArray(String[]::new);

  private Failures() {}

  /**
   * {@code error} as it leaves an activity: a non-retryable {@link ApplicationFailure} of its class
   * name for the kinds above, else itself (Temporal retries it).
   */
  public static RuntimeException crossing(RuntimeException error) {
    boolean permanent =
        WORKSPACE.stream().anyMatch(type -> type.isInstance(error))
            || (error instanceof AgentException && !(error instanceof ModelException));
    if (!permanent) {
      return error;
    }
    String message = error.getMessage() == null ? error.getClass().getName() : error.getMessage();
    return ApplicationFailure.newNonRetryableFailureWithCause(
        message, error.getClass().getName(), error);
  }
}
