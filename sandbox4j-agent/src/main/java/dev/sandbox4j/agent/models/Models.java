package dev.sandbox4j.agent.models;

import dev.sandbox4j.agent.Model;
import java.util.function.Function;

/**
 * Models by name: {@code anthropic:<model>} ({@link AnthropicModel}), {@code openai:<model>}
 * ({@link OpenAIModel}) or {@code test} ({@link TestModel}).
 *
 * <p>The provider SDKs are optional dependencies: a name whose SDK is not on the class path fails
 * with the artifact to add, before any of the adapter's classes is loaded.
 */
public final class Models {

  private Models() {}

  /**
   * The model {@code name} names.
   *
   * @throws IllegalArgumentException naming the problem: no provider prefix, unknown provider, the
   *     provider's SDK missing from the class path, or no API key in the environment
   */
  public static Model of(String name) {
    return of(name, System::getenv);
  }

  static Model of(String name, Function<String, String> env) {
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
    switch (provider) {
      case "anthropic" -> {
        requireSdk(
            name,
            "com.anthropic.client.okhttp.AnthropicOkHttpClient",
            "com.anthropic:anthropic-java");
        return AnthropicModel.fromEnvironment(model, env);
      }
      case "openai" -> {
        requireSdk(name, "com.openai.client.okhttp.OpenAIOkHttpClient", "com.openai:openai-java");
        return OpenAIModel.fromEnvironment(model, env);
      }
      default -> {}
    }
    throw new IllegalArgumentException(
        "unknown model provider '"
            + provider
            + "' in '"
            + name
            + "': the providers are anthropic and openai");
  }

  private static void requireSdk(String name, String sdkClass, String artifact) {
    try {
      Class.forName(sdkClass, false, Models.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError e) {
      throw new IllegalArgumentException(
          "model '"
              + name
              + "' needs the provider's Java SDK on the class path: add the dependency "
              + artifact
              + " (it is optional in sandbox4j-agent)");
    }
  }
}
