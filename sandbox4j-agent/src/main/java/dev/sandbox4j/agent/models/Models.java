package dev.sandbox4j.agent.models;

import dev.sandbox4j.agent.Model;

/** Models by name: {@code anthropic:<model>}, {@code openai:<model>} or {@code test}. */
public final class Models {

  private Models() {}

  /**
   * The model {@code name} names.
   *
   * @throws IllegalArgumentException naming the problem: no provider prefix, unknown provider, or
   *     the provider's SDK missing from the class path
   */
  public static Model of(String name) {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException(
          "a model name is required, such as anthropic:claude-sonnet-4-5");
    }
    if (name.equals("test")) {
      return new TestModel();
    }
    int colon = name.indexOf(':');
    if (colon <= 0 || colon == name.length() - 1) {
      throw new IllegalArgumentException(
          "model '"
              + name
              + "' has no provider: write <provider>:<model>, such as anthropic:claude-sonnet-4-5"
              + " or openai:gpt-5");
    }
    String provider = name.substring(0, colon);
    String model = name.substring(colon + 1);
    if (provider.equals("anthropic") || provider.equals("openai")) {
      throw new IllegalArgumentException(
          "the " + provider + " adapter is not built yet (model '" + model + "')");
    }
    throw new IllegalArgumentException(
        "unknown model provider '"
            + provider
            + "' in '"
            + name
            + "': the providers are anthropic and openai");
  }
}
