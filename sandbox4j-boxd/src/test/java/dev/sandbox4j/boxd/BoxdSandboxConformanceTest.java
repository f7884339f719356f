package dev.sandbox4j.boxd;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The whole workspace contract through {@link BoxdSandbox} against the fake boxd on loopback. */
class BoxdSandboxConformanceTest extends WorkspaceConformanceSuite {

  private static FakeBoxd boxd;

  /** Root on Linux with crun, as the local engine behind the fake needs; a failure under CI. */
  static void requireLocalEngine() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun"))
            || Files.isExecutable(Path.of("/usr/bin/crun")),
        "crun (sandbox4j setup)");
  }

  @BeforeAll
  static void startFake() throws Exception {
    boxd = new FakeBoxd();
  }

  @AfterAll
  static void stopFake() {
    if (boxd != null) {
      boxd.close();
    }
  }

  @Override
  protected WorkspaceProvider provider() {
    return boxd.client().build();
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    return boxd.client().beforeCreate(() -> SlowCreation.sleep(delay)).build().newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    return boxd.client().env(env).build().newBackend();
  }
}
