package dev.sandbox4j.workspace.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import org.junit.jupiter.api.Assumptions;

/**
 * Skips a test whose host prerequisite is missing, except in CI ({@code CI=true}), where a missing
 * prerequisite is a failure: a skipped test there would be a check that cannot fail.
 */
public final class Prerequisites {
  private Prerequisites() {}

  /**
   * Continues if {@code ok}; otherwise fails under {@code CI=true} and skips elsewhere.
   *
   * @param what the prerequisite, as a reader of the test report should see it
   */
  public static void require(boolean ok, String what) {
    if (ok) {
      return;
    }
    if ("true".equalsIgnoreCase(System.getenv("CI"))) {
      fail("missing prerequisite (CI=true, so this fails instead of skipping): " + what);
    }
    Assumptions.abort("missing prerequisite: " + what);
  }
}
