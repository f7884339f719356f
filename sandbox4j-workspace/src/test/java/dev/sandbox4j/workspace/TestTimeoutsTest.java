package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The build gives every test and lifecycle method JUnit's default timeout (the parent pom's
 * surefire configuration), so that a test that hangs fails CI instead of stalling it.
 */
class TestTimeoutsTest {

  /** Hands the test its own context, to read the configuration parameters JUnit runs with. */
  @RegisterExtension
  static final ParameterResolver CONTEXT =
      new ParameterResolver() {
        @Override
        public boolean supportsParameter(ParameterContext p, ExtensionContext e) {
          return p.getParameter().getType() == ExtensionContext.class;
        }

        @Override
        public Object resolveParameter(ParameterContext p, ExtensionContext e) {
          return e;
        }
      };

  @Test
  void everyTestAndLifecycleMethodHasADefaultTimeout(ExtensionContext context) {
    assertThat(context.getConfigurationParameter("junit.jupiter.execution.timeout.mode"))
        .contains("enabled");
    assertThat(
            context.getConfigurationParameter(
                "junit.jupiter.execution.timeout.testable.method.default"))
        .as("a default timeout for every @Test")
        .isPresent();
    assertThat(
            context.getConfigurationParameter(
                "junit.jupiter.execution.timeout.lifecycle.method.default"))
        .as("a default timeout for every @BeforeAll/@AfterEach...")
        .isPresent();
  }
}
