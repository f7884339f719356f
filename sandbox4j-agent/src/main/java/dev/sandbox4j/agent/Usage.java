package dev.sandbox4j.agent;

/**
 * What a run, or one model response, cost.
 *
 * @param requests model requests made
 * @param inputTokens tokens the model read, as its provider counts them
 * @param outputTokens tokens the model wrote
 * @param toolCalls tool calls carried out
 */
public record Usage(long requests, long inputTokens, long outputTokens, long toolCalls) {

  /** Nothing used. */
  public static final Usage NONE = new Usage(0, 0, 0, 0);

  public Usage {
    if (requests < 0 || inputTokens < 0 || outputTokens < 0 || toolCalls < 0) {
      throw new IllegalArgumentException("usage counts cannot be negative");
    }
  }

  /** Usage of one model response with these token counts. */
  public static Usage ofTokens(long inputTokens, long outputTokens) {
    return new Usage(1, inputTokens, outputTokens, 0);
  }

  /** The sum of this and {@code other}. */
  public Usage plus(Usage other) {
    return new Usage(
        requests + other.requests,
        inputTokens + other.inputTokens,
        outputTokens + other.outputTokens,
        toolCalls + other.toolCalls);
  }

  /** This usage with total tokens {@code inputTokens + outputTokens}. */
  public long totalTokens() {
    return inputTokens + outputTokens;
  }
}
