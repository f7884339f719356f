package dev.sandbox4j.agent.tools;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;

/**
 * Skips a test whose host prerequisite is missing, except in CI, where that is a failure (the
 * runtime's test helper of the same name, which is not in a test-jar).
 */
final class Prerequisites {
  private Prerequisites() {}

  static void require(boolean ok, String what) {
    if (ok) {
      return;
    }
    if ("true".equalsIgnoreCase(System.getenv("CI"))) {
      fail("missing prerequisite (CI=true, so this fails instead of skipping): " + what);
    }
    Assumptions.abort("missing prerequisite: " + what);
  }

  /** Root on Linux with crun: what the local engine needs. */
  static void requireLocalEngine() {
    require(System.getProperty("os.name").equals("Linux"), "Linux");
    require("root".equals(System.getProperty("user.name")), "root");
    boolean crun = false;
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
      crun |= !dir.isEmpty() && Files.isExecutable(Path.of(dir, "crun"));
    }
    require(crun, "crun (apt-get install crun)");
  }
}
