package dev.sandbox4j.agent;

/**
 * Sampling settings passed to the model.
 *
 * @param maxTokens the most tokens one response may have
 * @param temperature sampling temperature, or {@code null} for the provider's default
 */
public record ModelSettings(int maxTokens, Double temperature) {

  /** 8,192 tokens per response, the provider's default temperature. */
  public static final ModelSettings DEFAULTS = new ModelSettings(8192, null);

  public ModelSettings {
    if (maxTokens <= 0) {
      throw new IllegalArgumentException("maxTokens must be positive, was " + maxTokens);
    }
    if (temperature != null && (temperature < 0 || temperature > 2)) {
      throw new IllegalArgumentException("temperature must be in 0..2, was " + temperature);
    }
  }
}
