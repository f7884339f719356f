package com.example.workspace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The user guide's code (taken from this example's classes) does what the guide says. */
class UserGuideTest {
  @Test
  void aWorkspaceRunsCommandsAndBackgroundCommandsAndHasFiles() throws InterruptedException {
    Prerequisites.requireLocalSandboxes();
    assertEquals(
        "python3 - printed 42\nserver stopped: true true\n"
            + "repl said: got one got two eof OptionalInt[0]\nprint('hi') 4 1 false",
        CommandsAndFiles.run(new LocalSandbox()));
  }

  @Test
  void aShapedSandboxGoesThroughItsLifecycle() {
    Prerequisites.requireLocalSandboxes();
    String out = LocalSandboxes.run();
    assertTrue(
        out.matches("running \\{task=demo\\} fork copied processes: (true|false) with-deps false"),
        out);
  }

  @Test
  void aWarmPoolHandsOutASandboxThatRuns() {
    Prerequisites.requireLocalSandboxes();
    String version = LocalSandboxes.warmPool();
    assertTrue(version.startsWith("v"), version);
  }

  @Test
  void aSandboxKeepsItsTimers() {
    Prerequisites.requireLocalSandboxes();
    SandboxTimers timers = Timers.run();
    assertEquals(Duration.ofMinutes(10), timers.autoSuspendTimeout());
    assertEquals(Duration.ofHours(2), timers.sandboxTimeout());
    assertEquals(Duration.ofHours(1), timers.idleTimeout());
  }

  @Test
  void egressPoliciesAreValuesThatHideTheirSecrets() {
    List<EgressPolicy> policies = Egress.policies("sk-1", "k-2");
    assertEquals(EgressPolicy.Mode.NONE, policies.get(0).mode());
    assertEquals(EgressPolicy.Mode.ALL, policies.get(1).mode());
    assertEquals(
        Map.of("Authorization", "Bearer sk-1"),
        policies.get(2).headersFor("api.example.com", 443, true));
    assertEquals(
        Map.of("X-Key", "k-2"), policies.get(3).headersFor("api.internal.example", 8080, false));
    assertFalse(policies.toString().contains("sk-1"), policies.toString());
  }

  @Test
  void aSandboxsEgressChangesWhileItRuns() {
    Prerequisites.requireLocalSandboxes();
    String out = Egress.networking("sk-1");
    assertTrue(out.contains("api.example.com") && !out.contains("sk-1"), out);
    assertTrue(out.lines().toList().getLast().contains("none"), out);
  }

  @Test
  void aSandboxsPortHasAUrlAndAForward() {
    Prerequisites.requireLocalSandboxes();
    assertEquals(
        "8000-ID.localhost token: true forward: true http://{port}-ID.localhost:PORT/",
        PortUrls.run());
  }
}
