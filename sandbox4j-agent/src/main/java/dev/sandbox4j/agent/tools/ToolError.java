package dev.sandbox4j.agent.tools;

/**
 * A failure the model can act on (a missing file, an ambiguous edit, a denied command), reported to
 * it as the tool's error result.
 *
 * <p>Not a {@code ModelRetryException}: the reference harness raises a retry for these, but a run
 * allows only a few retries per tool, counted over the whole run, and a long coding session makes
 * many such mistakes. An error result costs the model one turn and never fails the run.
 */
final class ToolError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  ToolError(String message) {
    super(message, null, false, false);
  }
}
