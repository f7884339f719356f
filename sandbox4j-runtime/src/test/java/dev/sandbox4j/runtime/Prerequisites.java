package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;

/** Skips a test whose host prerequisite is missing, except in CI, where that is a failure. */
public final class Prerequisites {
  private Prerequisites() {}

  /** See {@link dev.sandbox4j.workspace.conformance.Prerequisites#require}. */
  public static void require(boolean ok, String what) {
    dev.sandbox4j.workspace.conformance.Prerequisites.require(ok, what);
  }

  /**
   * Reports a part of a test that needs checkpoint/restore and was left out because {@code runtime}
   * cannot do it: a skip on a laptop, a failure under CI. Call it at the end of the test, after the
   * checks that do not need checkpoint/restore ran.
   */
  static void requireCheckpointRestore(OciRuntime runtime, String part) {
    java.util.Optional<String> why = Checkpoints.unavailable(runtime);
    require(why.isEmpty(), "checkpoint/restore for " + part + " (" + why.orElse("") + ")");
  }

  /** The local engine, and gVisor's runsc ({@code sandbox4j setup} installs it). */
  public static void requireGvisor() {
    requireLocalEngine();
    require(
        dev.sandbox4j.runtime.internal.oci.Gvisor.unavailable().isEmpty(),
        "gVisor's runsc (sandbox4j setup)");
  }

  /** Root on Linux with crun: what the local engine needs (the host setup itself is doctor's). */
  public static void requireLocalEngine() {
    require(System.getProperty("os.name").equals("Linux"), "Linux");
    require("root".equals(System.getProperty("user.name")), "root");
    require(OciRuntime.defaultCrun().isPresent(), "crun (sandbox4j setup)");
  }
}
