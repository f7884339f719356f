package dev.sandbox4j.agent;

/**
 * Something the model can ask the agent to do: a name, a description and an argument schema, and
 * the code that does it.
 *
 * <p>Most tools are built with {@link #of}: the arguments are a record, whose components (with
 * {@link Param}) give the JSON schema the model sees (component names in {@code snake_case}), and
 * every call's arguments are validated against that schema before the function runs. Invalid
 * arguments go back to the model as a retry prompt naming each problem.
 *
 * <p>What a call's failure does to the run: {@link ModelRetryException} asks the model to try again
 * (at most {@link #maxRetries()} times in a row: a call that returns resets the count); {@code
 * WorkspaceUnavailableException} fails the run (the machine is gone); any other exception becomes a
 * tool result marked as an error, which the model reads. Implementations are thread-safe.
 */
public interface Tool {

  /** The tool as the model sees it. */
  ToolDefinition definition();

  /**
   * Carries out one call.
   *
   * @param context the run and workspace the call acts in
   * @param arguments the arguments as the model wrote them: JSON, not yet validated
   * @return the result as the model reads it
   */
  String call(ToolContext context, String arguments) throws Exception;

  /**
   * How many retry prompts in a row this tool may cause before the run fails; 3 by default. A call
   * that returns resets the count.
   */
  default int maxRetries() {
    return 3;
  }

  /** The code behind a tool built with {@link #of}. */
  @FunctionalInterface
  interface Function<A> {
    String apply(ToolContext context, A arguments) throws Exception;
  }

  /**
   * A tool whose arguments are the record {@code argumentsType}.
   *
   * @throws IllegalArgumentException if the record has a component type that has no JSON schema
   *     mapping (supported: strings, numbers, booleans, enums, lists, string maps, records)
   */
  static <A extends Record> Tool of(
      String name, String description, Class<A> argumentsType, Function<A> function) {
    return new RecordTool<>(name, description, argumentsType, function);
  }
}
