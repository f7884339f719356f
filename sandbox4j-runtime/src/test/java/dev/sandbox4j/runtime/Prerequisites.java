package dev.sandbox4j.runtime;

import static org.junit.jupiter.api.Assertions.fail;

import org.junit.jupiter.api.Assumptions;

/** Skips a test whose host prerequisite is missing, except in CI, where that is a failure. */
final class Prerequisites {
  private Prerequisites() {}

  /**
   * Continues if {@code ok}; otherwise fails under {@code CI=true} and skips elsewhere.
   *
   * @param what the prerequisite, as a reader of the test report should see it
   */
  static void require(boolean ok, String what) {
    if (ok) {
      return;
    }
    if ("true".equalsIgnoreCase(System.getenv("CI"))) {
      fail("missing prerequisite (CI=true, so this fails instead of skipping): " + what);
    }
    Assumptions.abort("missing prerequisite: " + what);
  }

  /** Root on Linux with crun: what the local engine needs (the host setup itself is doctor's). */
  static void requireLocalEngine() {
    require(System.getProperty("os.name").equals("Linux"), "Linux");
    require("root".equals(System.getProperty("user.name")), "root");
    require(OciRuntime.defaultCrun().isPresent(), "crun (sandbox4j setup)");
  }
}
