package com.example.workspace;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Duration;

/**
 * Runs a tiny Python program in a fresh local sandbox, attaches to it again by ref, destroys it.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws InterruptedException {
    System.out.println(run());
  }

  /** What {@link #main} prints: the command's exit code and output, and the sandbox's ref. */
  static String run() throws InterruptedException {
    // [workspace-api]
    LocalSandbox sandboxes = new LocalSandbox(); // or LocalSandbox.builder()...build()
    Workspace ws = Workspace.of(sandboxes.newBackend()); // no I/O yet: created on first use
    ws.writeText("calc.py", "def add(a, b):\n    return a - b\n");
    CommandResult r =
        ws.run(
            Command.argv("python3", "-c", "import calc; print(calc.add(2, 2))"),
            RunOptions.withTimeout(Duration.ofSeconds(10)));
    System.out.println(r.exitCode() + " " + r.stdoutText()); // 0 0
    BackgroundCommand server =
        ws.start(Command.shell("python3 -m http.server 8000"), RunOptions.defaults());
    server.stop(Duration.ofSeconds(5)); // SIGTERM to its process group, then SIGKILL
    WorkspaceRef ref = ws.open(); // store it: "local:..."
    Workspace later = Workspace.of(sandboxes.backend(ref).orElseThrow()); // from any JVM
    String again = later.readText("calc.py");
    sandboxes.destroy(ref); // explicit; nothing destroys on its own
    // [/workspace-api]
    return r.exitCode() + " " + r.stdoutText().strip() + " " + again.length() + " " + ref;
  }
}
