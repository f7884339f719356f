package dev.sandbox4j.agent.models;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.agent.Model;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ModelsTest {

  private static final Map<String, String> KEYS =
      Map.of("ANTHROPIC_API_KEY", "sk-ant-test", "OPENAI_API_KEY", "sk-test");

  @Test
  void anthropicNamesTheAnthropicAdapter() {
    Model model = Models.of("anthropic:claude-sonnet-4-5", KEYS::get);

    assertThat(model).isInstanceOf(AnthropicModel.class);
    assertThat(model.name()).isEqualTo("anthropic:claude-sonnet-4-5");
  }

  @Test
  void openaiNamesTheOpenAiAdapter() {
    Model model = Models.of("openai:gpt-5", KEYS::get);

    assertThat(model).isInstanceOf(OpenAIModel.class);
    assertThat(model.name()).isEqualTo("openai:gpt-5");
  }

  @Test
  void aMissingKeyIsNamedByItsVariable() {
    assertThatThrownBy(() -> Models.of("anthropic:claude-sonnet-4-5", name -> null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ANTHROPIC_API_KEY");
    assertThatThrownBy(() -> Models.of("openai:gpt-5", name -> null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("OPENAI_API_KEY");
  }

  @Test
  void aMissingSdkIsNamedByItsArtifact() {
    assertThatThrownBy(() -> ofWithoutSdks("anthropic:claude-sonnet-4-5"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("com.anthropic:anthropic-java");
    assertThatThrownBy(() -> ofWithoutSdks("openai:gpt-5"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("com.openai:openai-java");
  }

  @Test
  void unknownProvidersAndBareNamesAreRefused() {
    assertThatThrownBy(() -> Models.of("gemini:pro", KEYS::get))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown model provider 'gemini'");
    assertThatThrownBy(() -> Models.of("gpt-5", KEYS::get))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("has no provider");
    assertThat(Models.of("test", KEYS::get)).isInstanceOf(TestModel.class);
  }

  /**
   * {@code Models.of(name)} loaded by a class loader that cannot see the provider SDKs, as when an
   * application leaves the optional dependencies out.
   */
  private static Object ofWithoutSdks(String name) throws Throwable {
    URL classes = Models.class.getProtectionDomain().getCodeSource().getLocation();
    ClassLoader withoutSdks =
        new ClassLoader(ModelsTest.class.getClassLoader()) {
          @Override
          protected Class<?> loadClass(String className, boolean resolve)
              throws ClassNotFoundException {
            // the agent's own classes too, so that the child loader defines them and they see
            // this loader's view of the class path
            if (className.startsWith("com.anthropic.")
                || className.startsWith("com.openai.")
                || className.startsWith("dev.sandbox4j.agent.")) {
              throw new ClassNotFoundException(className);
            }
            return super.loadClass(className, resolve);
          }
        };
    try (URLClassLoader loader = new URLClassLoader(new URL[] {classes}, withoutSdks)) {
      Class<?> models = loader.loadClass(Models.class.getName());
      assertThat(models.getClassLoader()).isSameAs(loader);
      try {
        return models.getMethod("of", String.class).invoke(null, name);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    }
  }
}
