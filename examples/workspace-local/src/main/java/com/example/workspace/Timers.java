package com.example.workspace;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import java.time.Duration;
import java.time.Instant;

/** The user guide's timers: a sandbox that suspends, and ends, on its own. */
final class Timers {
  private Timers() {}

  /** The timers the new sandbox keeps. */
  static SandboxTimers run() {
    // [timers]
    LocalSandbox sandboxes =
        LocalSandbox.builder()
            .autoSuspendTimeout(Duration.ofMinutes(10)) // suspend after 10 idle minutes
            .sandboxTimeout(Duration.ofHours(2)) // destroy 2 h after creation (default 24 h)
            .idleTimeout(Duration.ofHours(1)) // destroy after 1 idle hour (default: never)
            .deleteAfter(Instant.now().plus(Duration.ofDays(7))) // destroy then (default: never)
            .build();
    WorkspaceRef ref = Workspace.of(sandboxes.newBackend()).open();
    SandboxTimers timers = sandboxes.timers(ref).orElseThrow(); // the settings and ends()
    // [/timers]
    sandboxes.destroy(ref);
    return timers;
  }
}
