package dev.sandbox4j.workspace;

/**
 * A backend that runs commands. See the contract in {@link dev.sandbox4j.workspace}: argv or {@code
 * sh -c}, stdin at EOF unless given and streamed as its source yields bytes (a background command's
 * {@link BackgroundCommand#writeStdin} must reach the command while it runs, so never read the
 * whole source before starting), 127/126 for missing/non-executable programs, the deadline and
 * output limit kill every process the command started, and a background child holding the output
 * pipe does not block the return.
 */
public interface SupportsCommands {

  /**
   * Runs a command in the working directory and waits for it.
   *
   * <p>Interrupting the calling thread cancels the command: every process it started is killed and
   * the run throws {@link java.util.concurrent.CancellationException} with the thread's interrupt
   * flag set again.
   *
   * @return the exit code and output; a non-zero exit is a result, not an error
   * @throws WorkspaceTimeoutException past the deadline, with partial output
   * @throws WorkspaceOutputLimitException past the output limit
   * @throws WorkspaceUnavailableException if the workspace is gone, also when it is destroyed while
   *     the command runs
   */
  CommandResult run(Command command, RunOptions options);
}
