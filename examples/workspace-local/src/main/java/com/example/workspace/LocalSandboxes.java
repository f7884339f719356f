package com.example.workspace;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SnapshotInfo;

/**
 * The user guide's local sandboxes: a sandbox shaped by the builder, then its lifecycle (suspend,
 * stop, hibernate, fork, snapshot).
 */
final class LocalSandboxes {
  private LocalSandboxes() {}

  /**
   * Its state and labels at the end, whether the fork copied processes, the snapshot's name, and
   * whether the snapshot is still listed after its removal.
   */
  static String run() {
    // [local-sandboxes]
    LocalSandbox sandboxes =
        LocalSandbox.builder()
            .cpus(2)
            .memory(2L << 30)
            .pids(1024) // shape a new sandbox
            .label("task", "demo")
            .workingDirectory("/home/sandbox/project") // created in a new sandbox
            .env("PYTHONUNBUFFERED", "1") // every command, also after attaching
            .build();
    Workspace ws = Workspace.of(sandboxes.newBackend());
    sandboxes.list(); // SandboxInfo: ref, state, image, labels, limits
    sandboxes.info(ws.open()); // the same for one sandbox; empty once it is gone
    sandboxes.gc(); // what crashes left behind
    // [/local-sandboxes]
    sandboxes.removeSnapshot("with-deps"); // a run that failed half-way may have left it
    // [lifecycle]
    WorkspaceRef ref = ws.open();
    sandboxes.suspend(ref); // every process frozen, memory kept (state "suspended")
    sandboxes.resume(ref); // thawed
    sandboxes.stop(ref); // processes ended, files kept (state "stopped")
    sandboxes.start(ref); // started again, with a fresh init
    sandboxes.hibernate(ref); // processes saved to disk, memory freed (state "hibernated")
    ws.run(Command.shell("ls")); // any operation wakes a suspended, stopped or hibernated sandbox

    ForkResult fork = sandboxes.fork(ref); // a new sandbox with a copy of the files and processes
    fork.processesCopied(); // true where checkpoint/restore works (sandbox4j doctor)
    fork.reason(); // if not, why: never silently
    fork.notCarried(); // processes left out: commands still attached
    SnapshotInfo saved = sandboxes.snapshot(ref, "with-deps"); // an image of its files and size
    LocalSandbox fromSnapshot = LocalSandbox.builder().snapshot("with-deps").build();
    sandboxes.snapshots();
    sandboxes.removeSnapshot("with-deps");
    // [/lifecycle]
    String seen =
        sandboxes.info(ref).orElseThrow().state()
            + " "
            + sandboxes.info(ref).orElseThrow().labels()
            + " fork copied processes: "
            + fork.processesCopied()
            + " "
            + saved.name()
            + " "
            + sandboxes.snapshots().stream().anyMatch(s -> s.name().equals("with-deps"));
    sandboxes.destroy(fork.ref());
    sandboxes.destroy(ref);
    return seen;
  }

  /** The user guide's warm pool: what {@code node -v} printed in a sandbox taken from it. */
  static String warmPool() {
    // [warm-pool]
    try (LocalSandbox sandboxes = LocalSandbox.builder().warmPool(4).build()) {
      Workspace ws = Workspace.of(sandboxes.newBackend());
      String version = ws.run(Command.shell("node -v")).stdoutText(); // a ready sandbox, if any
      sandboxes.destroy(ws.open());
      return version.strip();
    } // close(): destroys the ones still waiting
    // [/warm-pool]
  }
}
