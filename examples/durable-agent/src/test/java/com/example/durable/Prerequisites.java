package com.example.durable;

import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/** Local sandboxes need root on Linux, on a host that `sandbox4j setup` prepared. */
final class Prerequisites {
  private Prerequisites() {}

  /** Skips the test on a host without them, except in CI, where that fails it. */
  static void requireLocalSandboxes() {
    if (System.getProperty("os.name").equals("Linux")
        && System.getProperty("user.name").equals("root")) {
      return;
    }
    String why = "local sandboxes need root on Linux (then: sandbox4j setup, sandbox4j doctor)";
    if ("true".equalsIgnoreCase(System.getenv("CI"))) {
      Assertions.fail(why);
    }
    Assumptions.abort(why);
  }
}
